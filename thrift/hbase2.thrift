/*
 * The part of HBase 2.2+'s Thrift2 service (THBaseService) that hqueue uses:
 * creating tables pre-split at given keys and changing a family's TTL, which
 * Thrift1 cannot do, and listing region locations; and the increment and append
 * calls, which hqueue standalone serves to any Thrift2 client. Field ids and names follow HBase's
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
