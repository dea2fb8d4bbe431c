// One call of HBase's Admin API the Thrift gateways do not offer, run by
// hqueue.testing.hbase.HBaseCluster.admin with the cluster's own class path (Java's
// single-file source launcher: no build step).
//
// Usage: HBaseAdminCall CONF_DIR split TABLE SPLIT_KEY_HEX
//        HBaseAdminCall CONF_DIR move TABLE ROW_HEX PORT
//        HBaseAdminCall CONF_DIR shutdown
// Prints "done" once the call has taken effect.
import java.util.HexFormat;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.ServerName;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.client.RegionLocator;

public class HBaseAdminCall {
  public static void main(String[] args) throws Exception {
    Configuration conf = HBaseConfiguration.create();
    conf.addResource(new Path(args[0], "hbase-site.xml"));
    try (Connection connection = ConnectionFactory.createConnection(conf);
        Admin admin = connection.getAdmin()) {
      switch (args[1]) {
        case "split":
          TableName table = TableName.valueOf(args[2]);
          int before = admin.getRegions(table).size();
          admin.split(table, HexFormat.of().parseHex(args[3]));
          // split() returns once the master accepted it: wait for the daughters.
          long deadline = System.currentTimeMillis() + 120_000;
          while (admin.getRegions(table).size() <= before) {
            if (System.currentTimeMillis() > deadline) {
              throw new IllegalStateException("the split did not happen in 120 s");
            }
            Thread.sleep(100);
          }
          break;
        case "move":
          // The region holding ROW goes to the region server on PORT.
          try (RegionLocator locator = connection.getRegionLocator(TableName.valueOf(args[2]))) {
            byte[] row = HexFormat.of().parseHex(args[3]);
            int port = Integer.parseInt(args[4]);
            ServerName target =
                admin.getRegionServers().stream()
                    .filter(s -> s.getPort() == port)
                    .findFirst()
                    .orElseThrow(() -> new IllegalArgumentException("no region server on " + port));
            admin.move(
                locator.getRegionLocation(row, true).getRegion().getEncodedNameAsBytes(), target);
            long until = System.currentTimeMillis() + 120_000;
            while (!locator.getRegionLocation(row, true).getServerName().equals(target)) {
              if (System.currentTimeMillis() > until) {
                throw new IllegalStateException("the move did not happen in 120 s");
              }
              Thread.sleep(100);
            }
          }
          break;
        case "shutdown":
          // The master stops every region server (each flushes and closes its
          // regions), then itself.
          admin.shutdown();
          break;
        default:
          throw new IllegalArgumentException("unknown call " + args[1]);
      }
    }
    System.out.println("done");
  }
}
