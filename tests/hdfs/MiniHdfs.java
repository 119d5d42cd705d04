// A real HDFS for the tests: Hadoop's own NameNode(s) and DataNodes (MiniDFSCluster) in this
// JVM, on loopback, every port chosen free, data under one directory.
//
//   java -cp "JARS/*" MiniHdfs.java --dir DIR [--datanodes N] [--ha | --rpc-port P] [--conf KEY=VALUE ...]
//
// It prints one JSON line when the cluster is up ({"ready": true, "namenodes": [{"http": P,
// "https": P, "rpc": P}, ...]}; 0 for a scheme dfs.http.policy turns off), then reads commands on standard input, one a line, and answers each with
// one JSON line ({"ok": true, ...} or {"ok": false, "error": "..."}). The commands are the
// faults and the set-up the tests need, which a real cluster's admin tools would give:
//
//   mkdir PATH OWNER MODE          make a directory, owned by OWNER, with octal MODE
//   quota PATH BYTES               space quota on PATH (-1 clears it)
//   safemode enter|leave           the active NameNode in or out of safe mode
//   failover FROM TO               HA: NameNode FROM to standby, TO to active
//   stop-datanode I | start-datanode I   kill DataNode I / bring it back on its ports
//   restart-namenode I             shut NameNode I down and start it again, same ports
//   stop-namenode I | start-namenode I   the same in two steps, to hold it down a while
//   rpc-count                      RPC calls the NameNodes have served, summed
//   nn-ops                         namespace operations the NameNodes have served, counted
//                                  now (not JMX's cached view): {"audit": {"webhdfs":
//                                  {"getfileinfo": N, ...}, "rpc": {...}}, "metrics":
//                                  {"CreateFileOps": N, ...}}; audit: every audited call by
//                                  the protocol it came by (a REST request, or an RPC such
//                                  as a DataNode's create on behalf of a WebHDFS write);
//                                  metrics: NameNodeActivity's counters (of the NameNode
//                                  started last, in an HA cluster); http: every WebHDFS
//                                  request the NameNodes' HTTP servers answered, by method
//                                  and op ({"PUT RENAME": N, ...}), the audit's unlogged
//                                  ones too (a CREATE's redirect, a RENAME answered false)
//   stop                           shut everything down and exit
//
// Closing standard input also shuts the cluster down, so a test process that dies leaves no
// JVM behind.

import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.lang.reflect.Field;
import java.net.InetAddress;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import javax.management.MBeanServer;
import javax.management.ObjectName;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.SafeModeAction;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.HdfsConfiguration;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.MiniDFSNNTopology;
import org.apache.hadoop.hdfs.protocol.HdfsConstants;
import org.apache.hadoop.hdfs.server.namenode.AuditLogger;
import org.apache.hadoop.hdfs.server.namenode.NameNode;
import org.apache.hadoop.http.FilterContainer;
import org.apache.hadoop.http.FilterInitializer;
import org.apache.hadoop.ipc.Server;
import org.apache.hadoop.metrics2.lib.MutableCounterLong;

public class MiniHdfs {
    private static MiniDFSCluster cluster;
    private static boolean ha;
    private static final Map<Integer, MiniDFSCluster.DataNodeProperties> stopped = new HashMap<>();

    public static void main(String[] args) throws Exception {
        String dir = null;
        int datanodes = 2;
        int rpcPort = 0;  // 0: chosen free
        Configuration conf = new HdfsConfiguration();
        Set<String> given = new HashSet<>();
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--dir": dir = args[++i]; break;
                case "--datanodes": datanodes = Integer.parseInt(args[++i]); break;
                case "--ha": ha = true; break;
                case "--rpc-port": rpcPort = Integer.parseInt(args[++i]); break;
                case "--conf": {
                    String[] kv = args[++i].split("=", 2);
                    conf.set(kv[0], kv[1]);
                    given.add(kv[0]);
                    break;
                }
                default: throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        if (dir == null) throw new IllegalArgumentException("--dir DIR is required");
        conf.setBoolean("dfs.webhdfs.enabled", true);
        // The launcher's settings, unless --conf gives them. (Not Configuration.setIfUnset:
        // hdfs-default.xml is loaded, so every one of these keys is set already and
        // setIfUnset changed nothing: the cluster ran with 128 MB blocks and a DataNode
        // noticed dead after 10.5 minutes.)
        Map<String, String> ours = new LinkedHashMap<>();
        ours.put("dfs.permissions.enabled", "true");
        // small blocks and quick heartbeats: a test's larger files span blocks, and a
        // killed DataNode is noticed in seconds (2 x recheck + 10 heartbeats: 16 s)
        ours.put("dfs.blocksize", String.valueOf(1024 * 1024));
        ours.put("dfs.namenode.fs-limits.min-block-size", "0");
        ours.put("dfs.heartbeat.interval", "1");
        ours.put("dfs.namenode.heartbeat.recheck-interval", "3000");
        ours.put("dfs.client.block.write.replace-datanode-on-failure.enable", "false");
        ours.put("dfs.namenode.safemode.extension", "0");
        ours.put("hadoop.security.authentication", "simple");
        for (Map.Entry<String, String> e : ours.entrySet()) {
            if (!given.contains(e.getKey())) conf.set(e.getKey(), e.getValue());
        }
        // nn-ops: besides the audit loggers configured (hdfs-default.xml's "default"), a
        // count of the same events by protocol and command
        conf.set("dfs.namenode.audit.loggers",
                 conf.get("dfs.namenode.audit.loggers", "default") + "," + OpCounter.class.getName());
        // and of the WebHDFS requests, by a filter on the HTTP servers beside the configured ones
        String filters = conf.get("hadoop.http.filter.initializers", "");
        conf.set("hadoop.http.filter.initializers",
                 (filters.isEmpty() ? "" : filters + ",") + RequestCounter.class.getName());
        MiniDFSCluster.Builder builder = new MiniDFSCluster.Builder(conf, new File(dir))
            .numDataNodes(datanodes);
        if (ha) builder.nnTopology(MiniDFSNNTopology.simpleHATopology());
        else builder.nameNodePort(rpcPort);
        cluster = builder.build();
        cluster.waitActive();
        if (ha) cluster.transitionToActive(0);
        // the tests' users write under directories they are given; the root is open to all
        DistributedFileSystem fs = cluster.getFileSystem(0);
        fs.setPermission(new Path("/"), new FsPermission((short) 01777));
        Runtime.getRuntime().addShutdownHook(new Thread(() -> cluster.shutdown(true)));
        System.out.println("{\"ready\": true, \"namenodes\": " + namenodes() + "}");
        System.out.flush();

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.isEmpty()) continue;
            String answer;
            try {
                answer = run(line.split("\\s+"));
            } catch (Exception e) {
                answer = "{\"ok\": false, \"error\": " + quote(e.toString()) + "}";
            }
            System.out.println(answer);
            System.out.flush();
            if (line.equals("stop")) break;
        }
        cluster.shutdown(true);
        System.exit(0);
    }

    private static String namenodes() {
        List<String> out = new ArrayList<>();
        int count = cluster.getNumNameNodes();
        for (int i = 0; i < count; i++) {
            NameNode nn = cluster.getNameNode(i);
            // 0: down, or that scheme is off (dfs.http.policy HTTP_ONLY or HTTPS_ONLY)
            int http = nn == null || nn.getHttpAddress() == null ? 0 : nn.getHttpAddress().getPort();
            int https = nn == null || nn.getHttpsAddress() == null ? 0
                : nn.getHttpsAddress().getPort();
            out.add("{\"http\": " + http + ", \"https\": " + https + ", \"rpc\": "
                + cluster.getNameNodePort(i) + "}");
        }
        return "[" + String.join(", ", out) + "]";
    }

    private static int active() {
        if (!ha) return 0;
        for (int i = 0; i < cluster.getNumNameNodes(); i++) {
            if (cluster.getNameNode(i) != null && cluster.getNameNode(i).isActiveState()) return i;
        }
        throw new IllegalStateException("no active NameNode");
    }

    private static String run(String[] cmd) throws Exception {
        switch (cmd[0]) {
            case "mkdir": {
                DistributedFileSystem fs = cluster.getFileSystem(active());
                Path p = new Path(cmd[1]);
                fs.mkdirs(p);
                fs.setOwner(p, cmd[2], null);
                fs.setPermission(p, new FsPermission(Short.parseShort(cmd[3], 8)));
                return "{\"ok\": true}";
            }
            case "quota": {
                long bytes = Long.parseLong(cmd[2]);
                cluster.getFileSystem(active()).setQuota(new Path(cmd[1]),
                    HdfsConstants.QUOTA_DONT_SET, bytes < 0 ? HdfsConstants.QUOTA_RESET : bytes);
                return "{\"ok\": true}";
            }
            case "safemode": {
                SafeModeAction action = cmd[1].equals("enter")
                    ? SafeModeAction.ENTER : SafeModeAction.LEAVE;
                boolean on = cluster.getFileSystem(active()).setSafeMode(action);
                return "{\"ok\": true, \"safemode\": " + on + "}";
            }
            case "failover": {
                cluster.transitionToStandby(Integer.parseInt(cmd[1]));
                cluster.transitionToActive(Integer.parseInt(cmd[2]));
                return "{\"ok\": true, \"active\": " + cmd[2] + "}";
            }
            case "stop-datanode": {
                int i = Integer.parseInt(cmd[1]);
                stopped.put(i, cluster.stopDataNode(i));
                return "{\"ok\": true}";
            }
            case "start-datanode": {
                int i = Integer.parseInt(cmd[1]);
                cluster.restartDataNode(stopped.remove(i), true);
                cluster.waitActive();
                return "{\"ok\": true}";
            }
            case "restart-namenode": {
                cluster.restartNameNode(Integer.parseInt(cmd[1]), true);
                if (ha) cluster.transitionToActive(Integer.parseInt(cmd[1]));
                return "{\"ok\": true, \"namenodes\": " + namenodes() + "}";
            }
            case "stop-namenode": {
                cluster.shutdownNameNode(Integer.parseInt(cmd[1]));
                return "{\"ok\": true}";
            }
            case "start-namenode": {
                cluster.restartNameNode(Integer.parseInt(cmd[1]), true);
                if (ha) cluster.transitionToActive(Integer.parseInt(cmd[1]));
                return "{\"ok\": true, \"namenodes\": " + namenodes() + "}";
            }
            case "rpc-count": {
                return "{\"ok\": true, \"calls\": " + rpcCalls() + "}";
            }
            case "nn-ops": {
                return "{\"ok\": true, \"audit\": " + OpCounter.json()
                    + ", \"metrics\": " + activity() + ", \"http\": "
                    + counts(RequestCounter.COUNTS) + "}";
            }
            case "stop":
                return "{\"ok\": true}";
            default:
                throw new IllegalArgumentException("unknown command " + cmd[0]);
        }
    }

    /** RPC calls served, summed over the NameNodes' RPC servers (JMX RpcActivity beans). */
    private static long rpcCalls() throws Exception {
        MBeanServer mbs = ManagementFactory.getPlatformMBeanServer();
        long total = 0;
        for (ObjectName name : mbs.queryNames(
                new ObjectName("Hadoop:service=NameNode,name=RpcActivityForPort*"), null)) {
            Object n = mbs.getAttribute(name, "RpcProcessingTimeNumOps");
            if (n instanceof Number) total += ((Number) n).longValue();
        }
        return total;
    }

    /** The NameNode's audited calls, counted by protocol ("webhdfs" or "rpc") and command. */
    public static class OpCounter implements AuditLogger {
        private static final Map<String, Map<String, LongAdder>> COUNTS = new ConcurrentHashMap<>();

        @Override
        public void initialize(Configuration conf) {}

        @Override
        public void logAuditEvent(boolean succeeded, String user, InetAddress addr, String cmd,
                                  String src, String dst, FileStatus stat) {
            String proto = "webhdfs".equals(Server.getProtocol()) ? "webhdfs" : "rpc";
            COUNTS.computeIfAbsent(proto, k -> new ConcurrentHashMap<>())
                .computeIfAbsent(cmd, k -> new LongAdder()).increment();
        }

        static String json() {
            List<String> protos = new ArrayList<>();
            for (Map.Entry<String, Map<String, LongAdder>> p : new TreeMap<>(COUNTS).entrySet()) {
                protos.add(quote(p.getKey()) + ": " + counts(p.getValue()));
            }
            return "{" + String.join(", ", protos) + "}";
        }
    }

    private static String counts(Map<String, LongAdder> counts) {
        List<String> out = new ArrayList<>();
        for (Map.Entry<String, LongAdder> c : new TreeMap<>(counts).entrySet()) {
            out.add(quote(c.getKey()) + ": " + c.getValue().sum());
        }
        return "{" + String.join(", ", out) + "}";
    }

    /** Adds {@link RequestFilter} to every HTTP server of the cluster (the NameNodes' serve
     *  WebHDFS through it; a DataNode's WebHDFS is served by Netty, in front of it). */
    public static class RequestCounter extends FilterInitializer {
        static final Map<String, LongAdder> COUNTS = new ConcurrentHashMap<>();

        @Override
        public void initFilter(FilterContainer container, Configuration conf) {
            container.addFilter("garmexport-request-counter", RequestFilter.class.getName(),
                                new HashMap<>());
        }
    }

    /** Counts each /webhdfs/ request by method and op, read from the query string (a
     *  parameter lookup could read a request's body). */
    public static class RequestFilter implements org.apache.hadoop.shaded.javax.servlet.Filter {
        @Override
        public void init(org.apache.hadoop.shaded.javax.servlet.FilterConfig config) {}

        @Override
        public void doFilter(org.apache.hadoop.shaded.javax.servlet.ServletRequest req,
                             org.apache.hadoop.shaded.javax.servlet.ServletResponse res,
                             org.apache.hadoop.shaded.javax.servlet.FilterChain chain)
                throws java.io.IOException, org.apache.hadoop.shaded.javax.servlet.ServletException {
            org.apache.hadoop.shaded.javax.servlet.http.HttpServletRequest http =
                (org.apache.hadoop.shaded.javax.servlet.http.HttpServletRequest) req;
            if (http.getRequestURI().startsWith("/webhdfs/")) {
                String op = "?";
                for (String kv : String.valueOf(http.getQueryString()).split("&")) {
                    if (kv.regionMatches(true, 0, "op=", 0, 3)) op = kv.substring(3).toUpperCase();
                }
                RequestCounter.COUNTS.computeIfAbsent(http.getMethod() + " " + op,
                                                      k -> new LongAdder()).increment();
            }
            chain.doFilter(req, res);
        }

        @Override
        public void destroy() {}
    }

    /** NameNodeActivity's counters, read from the metrics object itself (JMX caches them). */
    private static String activity() throws Exception {
        Object metrics = NameNode.getNameNodeMetrics();
        List<String> out = new ArrayList<>();
        for (Field f : metrics.getClass().getDeclaredFields()) {
            if (f.getType() != MutableCounterLong.class) continue;
            f.setAccessible(true);
            MutableCounterLong counter = (MutableCounterLong) f.get(metrics);
            if (counter == null) continue;
            String name = f.getName();
            out.add(quote(Character.toUpperCase(name.charAt(0)) + name.substring(1)) + ": "
                + counter.value());
        }
        return "{" + String.join(", ", out) + "}";
    }

    private static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }
}
