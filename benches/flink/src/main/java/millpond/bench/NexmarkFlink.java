package millpond.bench;

import java.io.IOException;
import java.io.InputStream;
import java.io.PrintWriter;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;
import java.time.temporal.TemporalAccessor;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.stream.Collectors;
import java.util.stream.Stream;

import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.ExplainDetail;
import org.apache.flink.table.api.Schema;
import org.apache.flink.table.api.StatementSet;
import org.apache.flink.table.api.Table;
import org.apache.flink.table.api.TableDescriptor;
import org.apache.flink.table.api.TableResult;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;
import org.apache.flink.table.catalog.Column;
import org.apache.flink.types.Row;
import org.apache.flink.util.CloseableIterator;

/**
 * Runs one Nexmark query file (Flink SQL, see queries/) over the JSON-lines
 * dump of a Millpond data directory, in a local Flink (a MiniCluster in this
 * JVM), the way `millpond run FILE --until-caught-up` runs it: bounded input
 * in streaming mode, RocksDB state, exactly-once checkpoints every second,
 * every view the file creates maintained to the end of the input.
 *
 * <p>usage: NexmarkFlink QUERY.sql INPUT_DIR PARALLELISM [--materialize OUT.jsonl | --explain] [-Dkey=value ...]
 *
 * <p>INPUT_DIR holds person, auction and bid, each either a directory of
 * JSON-lines files (one per Millpond partition, so that parallel readers have
 * splits) or a single NAME.json file. Every `CREATE TEMPORARY VIEW` of the
 * query file is an output: by default each goes to a blackhole sink (all of a
 * file's views in one job, sharing the sources, like Millpond's one dataflow
 * per file); with --materialize each view's changelog is collected and its
 * final rows are written, sorted, as JSON lines (for checking a translation
 * against `millpond view read`; slow, not for timing).
 *
 * <p>Prints one line: RESULT query=.. parallelism=.. events=.. seconds=..
 * after_submit_seconds=.. startup_seconds=.. events_per_s_per_core=..
 * checkpoints=.. checkpoint_bytes=.., where events are all the input's
 * records (persons, auctions and bids, as `millpond bench nexmark` counts
 * them), seconds is Flink's net run time of the job (task deployment to the
 * end, the final checkpoint included), after_submit_seconds the wall time
 * from execute()'s return to the end, startup_seconds the time before
 * (planning the SQL, starting the MiniCluster, submitting), events/s/core =
 * events / seconds / parallelism, and checkpoints the last completed
 * checkpoint's id.
 */
public final class NexmarkFlink {

    /** The Nexmark schemas, as in sql/nexmark/sources.sql; times are ms since 1970 in the JSON. */
    private static final Map<String, String> RAW_COLUMNS = new LinkedHashMap<>();

    /** The columns each view exposes: TIMESTAMP(3) (UTC) for the ms columns. */
    private static final Map<String, String> VIEW_COLUMNS = new LinkedHashMap<>();

    static {
        RAW_COLUMNS.put("person",
                "id BIGINT, name STRING, email_address STRING, credit_card STRING, city STRING, state STRING,"
                        + " date_time BIGINT, extra STRING");
        RAW_COLUMNS.put("auction",
                "id BIGINT, item_name STRING, description STRING, initial_bid BIGINT, reserve BIGINT,"
                        + " date_time BIGINT, expires BIGINT, seller BIGINT, category BIGINT, extra STRING");
        RAW_COLUMNS.put("bid",
                "auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING, date_time BIGINT,"
                        + " extra STRING");
        VIEW_COLUMNS.put("person",
                "id, name, email_address, credit_card, city, state, " + ts("date_time") + ", extra");
        VIEW_COLUMNS.put("auction",
                "id, item_name, description, initial_bid, reserve, " + ts("date_time") + ", " + ts("expires")
                        + ", seller, category, extra");
        VIEW_COLUMNS.put("bid", "auction, bidder, price, channel, url, " + ts("date_time") + ", extra");
    }

    private static String ts(String column) {
        return "CAST(TO_TIMESTAMP_LTZ(" + column + ", 3) AS TIMESTAMP(3)) AS " + column;
    }

    public static void main(String[] args) throws Exception {
        List<String> positional = new ArrayList<>();
        Map<String, String> overrides = new LinkedHashMap<>();
        Path materialize = null;
        boolean explain = false;
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--explain")) {
                explain = true;
            } else if (args[i].equals("--materialize")) {
                materialize = Paths.get(args[++i]);
            } else if (args[i].startsWith("-D") && args[i].contains("=")) {
                String kv = args[i].substring(2);
                overrides.put(kv.substring(0, kv.indexOf('=')), kv.substring(kv.indexOf('=') + 1));
            } else {
                positional.add(args[i]);
            }
        }
        if (positional.size() != 3) {
            System.err.println(
                    "usage: NexmarkFlink QUERY.sql INPUT_DIR PARALLELISM [--materialize OUT.jsonl | --explain] [-Dkey=value ...]");
            System.exit(2);
        }
        Path queryFile = Paths.get(positional.get(0));
        Path inputDir = Paths.get(positional.get(1)).toAbsolutePath();
        int parallelism = Integer.parseInt(positional.get(2));
        String query = queryFile.getFileName().toString().replaceFirst("\\.sql$", "");

        Map<String, Path> inputs = new LinkedHashMap<>();
        long events = 0;
        for (String table : RAW_COLUMNS.keySet()) {
            Path dir = inputDir.resolve(table);
            Path file = inputDir.resolve(table + ".json");
            Path path = Files.isDirectory(dir) ? dir : file;
            if (!Files.exists(path)) {
                throw new IllegalArgumentException("no " + dir + "/ nor " + file);
            }
            inputs.put(table, path);
            events += countLines(path);
        }

        Path checkpointDir = Paths.get(overrides.getOrDefault("execution.checkpointing.dir",
                "file:///tmp/flink-nexmark/checkpoints").replaceFirst("^file://", ""));
        Map<String, String> conf = new LinkedHashMap<>();
        conf.put("execution.runtime-mode", "STREAMING");
        conf.put("parallelism.default", Integer.toString(parallelism));
        conf.put("taskmanager.numberOfTaskSlots", Integer.toString(parallelism));
        // State: RocksDB, incremental checkpoints to the local disk, every second, exactly once.
        conf.put("state.backend.type", "rocksdb");
        conf.put("state.backend.rocksdb.localdir", "/tmp/flink-nexmark/rocksdb");
        conf.put("execution.checkpointing.interval", "1 s");
        conf.put("execution.checkpointing.mode", "EXACTLY_ONCE");
        conf.put("execution.checkpointing.storage", "filesystem");
        conf.put("execution.checkpointing.dir", "file://" + checkpointDir);
        conf.put("execution.checkpointing.incremental", "true");
        conf.put("execution.checkpointing.num-retained", "1");
        // Kept after the job ends, so that we can see how many there were and their size.
        conf.put("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION");
        // A failure fails the run instead of restarting it silently.
        conf.put("restart-strategy.type", "none");
        // RocksDB's memory (block cache and write buffers) comes from managed memory:
        // the same 256 MiB cap as `millpond run --state-cache-mib`'s default.
        conf.put("taskmanager.memory.managed.size", "256m");
        // Millpond reads JSON times as UTC; CAST(TIMESTAMP_LTZ AS TIMESTAMP) follows this zone.
        conf.put("table.local-time-zone", "UTC");
        conf.putAll(overrides);

        Configuration configuration = Configuration.fromMap(conf);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(configuration);
        StreamTableEnvironment tEnv = StreamTableEnvironment.create(env,
                EnvironmentSettings.newInstance().inStreamingMode().withConfiguration(configuration).build());

        for (String table : RAW_COLUMNS.keySet()) {
            tEnv.executeSql("CREATE TEMPORARY TABLE " + table + "_raw (" + RAW_COLUMNS.get(table) + ") WITH ("
                    + "'connector' = 'filesystem', 'path' = 'file://" + inputs.get(table) + "', 'format' = 'json')");
            tEnv.executeSql("CREATE TEMPORARY VIEW " + table + " AS SELECT " + VIEW_COLUMNS.get(table) + " FROM "
                    + table + "_raw");
        }
        Set<String> before = new LinkedHashSet<>(List.of(tEnv.listTemporaryViews()));
        for (String statement : statements(Files.readString(queryFile))) {
            tEnv.executeSql(statement);
        }
        List<String> outputs = new ArrayList<>();
        for (String view : tEnv.listTemporaryViews()) {
            if (!before.contains(view)) {
                outputs.add(view);
            }
        }
        if (outputs.isEmpty()) {
            throw new IllegalArgumentException(queryFile + " creates no view (CREATE TEMPORARY VIEW name AS ...)");
        }

        if (explain) {
            for (String view : outputs) {
                System.out.println("== " + view + "\n"
                        + tEnv.from(view).explain(ExplainDetail.CHANGELOG_MODE));
            }
            System.exit(0);
        }
        if (materialize != null) {
            materialize(tEnv, outputs, materialize);
            return;
        }

        StatementSet set = tEnv.createStatementSet();
        for (String view : outputs) {
            Table table = tEnv.from(view);
            Schema.Builder schema = Schema.newBuilder();
            for (Column column : table.getResolvedSchema().getColumns()) {
                schema.column(column.getName(), column.getDataType());
            }
            set.add(table.insertInto(TableDescriptor.forConnector("blackhole").schema(schema.build()).build()));
        }
        // execute() plans the job, starts the MiniCluster and submits the job; it returns once the job is
        // submitted. The run is timed from there to the job's end; the start-up is reported apart.
        long started = System.nanoTime();
        TableResult result = set.execute();
        long submitted = System.nanoTime();
        JobExecutionResult job = result.getJobClient().orElseThrow().getJobExecutionResult().get();
        long ended = System.nanoTime();
        // The job's own run time (from its creation in the cluster, so task deployment included, to its end):
        // a little longer than from execute()'s return.
        double seconds = job.getNetRuntime() / 1000.0;
        double startupSeconds = (submitted - started) / 1e9;
        double afterSubmit = (ended - submitted) / 1e9;
        long[] checkpoints = checkpoints(checkpointDir);
        System.out.printf("RESULT query=%s parallelism=%d events=%d seconds=%.2f after_submit_seconds=%.2f"
                        + " startup_seconds=%.2f events_per_s_per_core=%.0f checkpoints=%d checkpoint_bytes=%d"
                        + " views=%s%n",
                query, parallelism, events, seconds, afterSubmit, startupSeconds, events / seconds / parallelism,
                checkpoints[0], checkpoints[1], String.join(",", outputs));
        System.exit(0); // the MiniCluster's non-daemon threads would otherwise keep the JVM up
    }

    /** The statements of a SQL file: `--` comments dropped, split at `;`. */
    static List<String> statements(String sql) {
        String stripped = Stream.of(sql.split("\n"))
                .map(line -> line.replaceFirst("^\\s*--.*$", ""))
                .collect(Collectors.joining("\n"));
        List<String> out = new ArrayList<>();
        for (String s : stripped.split(";")) {
            if (!s.isBlank()) {
                out.add(s.trim());
            }
        }
        return out;
    }

    /** Lines in a file, or in every regular file under a directory. */
    static long countLines(Path path) throws IOException {
        List<Path> files;
        try (Stream<Path> walk = Files.walk(path)) {
            files = walk.filter(Files::isRegularFile).collect(Collectors.toList());
        }
        long lines = 0;
        byte[] buf = new byte[1 << 20];
        for (Path f : files) {
            try (InputStream in = Files.newInputStream(f)) {
                int n;
                while ((n = in.read(buf)) > 0) {
                    for (int i = 0; i < n; i++) {
                        if (buf[i] == '\n') {
                            lines++;
                        }
                    }
                }
            }
        }
        return lines;
    }

    /**
     * The highest completed checkpoint id (ids count up from 1) and the bytes under the checkpoint directory.
     * Flink may still be deleting subsumed checkpoints' files while this walks: a file gone is skipped.
     */
    static long[] checkpoints(Path dir) throws IOException {
        if (!Files.isDirectory(dir)) {
            return new long[] {0, 0};
        }
        long[] found = {0, 0};
        Files.walkFileTree(dir, new SimpleFileVisitor<Path>() {
            @Override
            public FileVisitResult preVisitDirectory(Path p, BasicFileAttributes attrs) {
                String name = p.getFileName().toString();
                if (name.startsWith("chk-") && Files.exists(p.resolve("_metadata"))) {
                    found[0] = Math.max(found[0], Long.parseLong(name.substring(4)));
                }
                return FileVisitResult.CONTINUE;
            }

            @Override
            public FileVisitResult visitFile(Path p, BasicFileAttributes attrs) {
                if (attrs.isRegularFile()) {
                    found[1] += attrs.size();
                }
                return FileVisitResult.CONTINUE;
            }

            @Override
            public FileVisitResult visitFileFailed(Path p, IOException e) throws IOException {
                if (e instanceof NoSuchFileException) {
                    return FileVisitResult.CONTINUE;
                }
                throw e;
            }
        });
        return found;
    }

    /** Collects each view's changelog and writes its final rows, sorted, as JSON lines ({"view": .., "row": {..}}). */
    static void materialize(StreamTableEnvironment tEnv, List<String> views, Path out) throws Exception {
        try (PrintWriter w = new PrintWriter(Files.newBufferedWriter(out, StandardCharsets.UTF_8))) {
            for (String view : views) {
                List<String> names = tEnv.from(view).getResolvedSchema().getColumnNames();
                // Each distinct row with its multiplicity, as an aggregate keyed by the whole row: its
                // changelog can be applied as upserts whatever the planner sends (a view's own changelog may
                // come as UPDATE_AFTERs without UPDATE_BEFOREs, keyed by a key we don't know).
                String columns = names.stream().map(n -> "`" + n + "`").collect(Collectors.joining(", "));
                Table counted = tEnv.sqlQuery("SELECT " + columns + ", COUNT(*) AS `millpond_rows` FROM `" + view
                        + "` GROUP BY " + columns);
                Map<String, Long> rows = new HashMap<>();
                long changes = 0;
                Map<String, Long> kinds = new TreeMap<>();
                try (CloseableIterator<Row> it = counted.execute().collect()) {
                    while (it.hasNext()) {
                        Row row = it.next();
                        changes++;
                        kinds.merge(row.getKind().name(), 1L, Long::sum);
                        StringBuilder json = new StringBuilder("{");
                        for (int i = 0; i < names.size(); i++) {
                            if (i > 0) {
                                json.append(',');
                            }
                            json.append(quote(names.get(i))).append(':').append(jsonValue(row.getField(i)));
                        }
                        String key = json.append('}').toString();
                        switch (row.getKind()) {
                            case INSERT, UPDATE_AFTER -> rows.put(key, (Long) row.getField(names.size()));
                            case DELETE, UPDATE_BEFORE -> rows.remove(key);
                        }
                    }
                }
                long total = 0;
                for (Map.Entry<String, Long> e : new TreeMap<>(rows).entrySet()) {
                    for (long i = 0; i < e.getValue(); i++) {
                        w.println("{\"view\":" + quote(view) + ",\"row\":" + e.getKey() + "}");
                        total++;
                    }
                }
                System.out.printf("MATERIALIZED view=%s changes=%d %s rows=%d%n", view, changes, kinds, total);
            }
        }
        System.exit(0);
    }

    static String jsonValue(Object v) {
        if (v == null) {
            return "null";
        } else if (v instanceof BigDecimal d) {
            return d.toPlainString();
        } else if (v instanceof Number || v instanceof Boolean) {
            return v.toString();
        } else if (v instanceof TemporalAccessor) {
            return quote(v.toString());
        }
        return quote(v.toString());
    }

    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                default -> {
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        return b.append('"').toString();
    }

    private NexmarkFlink() {}
}
