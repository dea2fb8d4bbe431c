/*
 * The part of HBase 2.2+'s Thrift2 service (THBaseService) that hqueue uses:
 * creating tables pre-split at given keys and changing a family's TTL, which
 * Thrift1 cannot do, and listing region locations; and the data calls (get,
 * put, delete, checkAndPut, scanners, increment, append), which hqueue
 * standalone serves to any Thrift2 client. Field ids and names follow HBase's
 * hbase-thrift/src/main/resources/org/apache/hadoop/hbase/thrift2/hbase.thrift,
 * so this client speaks to a real HBase Thrift2 server too; fields hqueue does
 * not use are left out (Thrift skips unknown fields).
 */

namespace py hbase2

struct TTableName {
  1: optional binary ns
  2: required binary qualifier
}

struct TColumnFamilyDescriptor {
  1: required binary name
  10: optional i32 maxVersions
  13: optional i32 timeToLive
}

struct TTableDescriptor {
  1: required TTableName tableName
  2: optional list<TColumnFamilyDescriptor> columns
}

struct THRegionInfo {
  1: required i64 regionId
  2: required binary tableName
  3: optional binary startKey
  4: optional binary endKey
  5: optional bool offline
  6: optional bool split
  7: optional i32 replicaId
}

struct TServerName {
  1: required string hostName
  2: optional i32 port
  3: optional i64 startCode
}

struct THRegionLocation {
  1: required TServerName serverName
  2: required THRegionInfo regionInfo
}

struct TTimeRange {
  1: required i64 minStamp,
  2: required i64 maxStamp
}

/** A family, or a column with its qualifier (a timestamp only in a TDelete). */
struct TColumn {
  1: required binary family,
  2: optional binary qualifier,
  3: optional i64 timestamp
}

/** A cell and its value (a TResult's cells; an append's columns). */
struct TColumnValue {
  1: required binary family,
  2: required binary qualifier,
  3: required binary value,
  4: optional i64 timestamp,
  5: optional binary tags,
  6: optional byte type
}

struct TColumnIncrement {
  1: required binary family,
  2: required binary qualifier,
  3: optional i64 amount = 1
}

struct TResult {
  1: optional binary row,
  2: required list<TColumnValue> columnValues,
  3: optional bool stale = false
  4: optional bool partial = false
}

struct TCellVisibility {
  1: optional string expression
}

struct TGet {
  1: required binary row,
  2: optional list<TColumn> columns,
  3: optional i64 timestamp,
  4: optional TTimeRange timeRange,
  5: optional i32 maxVersions,
  6: optional binary filterString,
  7: optional map<binary, binary> attributes
}

struct TPut {
  1: required binary row,
  2: required list<TColumnValue> columnValues
  3: optional i64 timestamp,
  5: optional map<binary, binary> attributes,
  6: optional i32 durability
  7: optional TCellVisibility cellVisibility
}

struct TDelete {
  1: required binary row,
  2: optional list<TColumn> columns,
  3: optional i64 timestamp,
  // HBase's enum TDeleteType, an i32 on the wire: DELETE_COLUMN = 0 (one version),
  // DELETE_COLUMNS = 1 (every version at or before the timestamp), DELETE_FAMILY = 2,
  // DELETE_FAMILY_VERSION = 3.
  4: optional i32 deleteType = 1,
  6: optional map<binary, binary> attributes,
  7: optional i32 durability
}

struct TScan {
  1: optional binary startRow,
  2: optional binary stopRow,
  3: optional list<TColumn> columns
  4: optional i32 caching,
  5: optional i32 maxVersions = 1,
  6: optional TTimeRange timeRange,
  7: optional binary filterString,
  8: optional i32 batchSize,
  9: optional map<binary, binary> attributes
  11: optional bool reversed
  12: optional bool cacheBlocks
  15: optional i32 limit
}

struct TIncrement {
  1: required binary row,
  2: required list<TColumnIncrement> columns,
  4: optional map<binary, binary> attributes,
  // HBase's enum TDurability (USE_DEFAULT = 0 ... FSYNC_WAL = 4), an i32 on the
  // wire; every write here is synced, whatever it asks.
  5: optional i32 durability
  6: optional TCellVisibility cellVisibility
  7: optional bool returnResults
}

struct TAppend {
  1: required binary row,
  2: required list<TColumnValue> columns,
  3: optional map<binary, binary> attributes,
  4: optional i32 durability
  5: optional TCellVisibility cellVisibility
  6: optional bool returnResults
}

exception TIOError {
  1: optional string message
}

exception TIllegalArgument {
  1: optional string message
}

service THBaseService {
  bool exists(1: required binary table, 2: required TGet tget) throws (1: TIOError io)

  list<bool> existsAll(1: required binary table, 2: required list<TGet> tgets)
    throws (1: TIOError io)

  TResult get(1: required binary table, 2: required TGet tget) throws (1: TIOError io)

  list<TResult> getMultiple(1: required binary table, 2: required list<TGet> tgets)
    throws (1: TIOError io)

  void put(1: required binary table, 2: required TPut tput) throws (1: TIOError io)

  bool checkAndPut(1: required binary table, 2: required binary row, 3: required binary family,
                   4: required binary qualifier, 5: binary value, 6: required TPut tput)
    throws (1: TIOError io)

  void putMultiple(1: required binary table, 2: required list<TPut> tputs)
    throws (1: TIOError io)

  void deleteSingle(1: required binary table, 2: required TDelete tdelete)
    throws (1: TIOError io)

  list<TDelete> deleteMultiple(1: required binary table, 2: required list<TDelete> tdeletes)
    throws (1: TIOError io)

  i32 openScanner(1: required binary table, 2: required TScan tscan) throws (1: TIOError io)

  list<TResult> getScannerRows(1: required i32 scannerId, 2: i32 numRows = 1)
    throws (1: TIOError io, 2: TIllegalArgument ia)

  void closeScanner(1: required i32 scannerId) throws (1: TIOError io, 2: TIllegalArgument ia)

  list<TResult> getScannerResults(1: required binary table, 2: required TScan tscan,
                                  3: i32 numRows = 1) throws (1: TIOError io)

  TResult increment(1: required binary table, 2: required TIncrement tincrement)
    throws (1: TIOError io)

  TResult append(1: required binary table, 2: required TAppend tappend) throws (1: TIOError io)

  list<THRegionLocation> getAllRegionLocations(1: required binary table) throws (1: TIOError io)

  bool tableExists(1: TTableName tableName) throws (1: TIOError io)

  void createTable(1: required TTableDescriptor desc, 2: optional list<binary> splitKeys)
    throws (1: TIOError io)

  void deleteTable(1: required TTableName tableName) throws (1: TIOError io)

  void disableTable(1: required TTableName tableName) throws (1: TIOError io)

  void modifyColumnFamily(1: required TTableName tableName,
                          2: required TColumnFamilyDescriptor column) throws (1: TIOError io)
}
