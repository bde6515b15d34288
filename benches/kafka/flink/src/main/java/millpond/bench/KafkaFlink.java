package millpond.bench;

import java.io.IOException;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.LinkedHashMap;
import java.util.Map;

import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.TableResult;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;

/**
 * `bid_stats` in Flink SQL with Kafka on both sides, the pipeline of
 * `millpond bench kafka`: the bids of INPUT_TOPIC (Nexmark bids as JSON,
 * read from the earliest offset to the offsets at the job's start, with
 * read_committed), `SELECT auction, COUNT(*), SUM(price), MAX(price) ...
 * GROUP BY auction` in RocksDB state, and the view written to SINK_TOPIC by
 * the Kafka connector's exactly-once sink (one Kafka transaction per
 * checkpoint, committed when the checkpoint completes), checkpoints every
 * second. The job ends when the input is read and its last transaction is
 * committed (the final checkpoint), so its run time is the time until Kafka
 * holds the whole view.
 *
 * <p>usage: KafkaFlink BROKERS INPUT_TOPIC SINK_TOPIC EVENTS PARALLELISM [-Dkey=value ...]
 *
 * <p>Prints: RESULT parallelism=.. events=.. seconds=.. after_submit_seconds=..
 * startup_seconds=.. events_per_s_per_core=.. checkpoints=.., where seconds
 * is Flink's net run time of the job (task deployment to the end, the final
 * checkpoint and its Kafka commit included).
 */
public final class KafkaFlink {

    public static void main(String[] args) throws Exception {
        Map<String, String> overrides = new LinkedHashMap<>();
        java.util.List<String> positional = new java.util.ArrayList<>();
        for (String arg : args) {
            if (arg.startsWith("-D") && arg.contains("=")) {
                String kv = arg.substring(2);
                overrides.put(kv.substring(0, kv.indexOf('=')), kv.substring(kv.indexOf('=') + 1));
            } else {
                positional.add(arg);
            }
        }
        if (positional.size() != 5) {
            System.err.println("usage: KafkaFlink BROKERS INPUT_TOPIC SINK_TOPIC EVENTS PARALLELISM [-Dkey=value ...]");
            System.exit(2);
        }
        String brokers = positional.get(0);
        String input = positional.get(1);
        String sink = positional.get(2);
        long events = Long.parseLong(positional.get(3));
        int parallelism = Integer.parseInt(positional.get(4));
        long started = System.nanoTime();

        Path checkpointDir = Paths.get("/tmp/flink-kafka/checkpoints");
        Map<String, String> conf = new LinkedHashMap<>();
        conf.put("execution.runtime-mode", "STREAMING");
        conf.put("parallelism.default", Integer.toString(parallelism));
        conf.put("taskmanager.numberOfTaskSlots", Integer.toString(parallelism));
        conf.put("state.backend.type", "rocksdb");
        conf.put("state.backend.rocksdb.localdir", "/tmp/flink-kafka/rocksdb");
        conf.put("execution.checkpointing.interval", "1 s");
        conf.put("execution.checkpointing.mode", "EXACTLY_ONCE");
        conf.put("execution.checkpointing.storage", "filesystem");
        conf.put("execution.checkpointing.dir", "file://" + checkpointDir);
        conf.put("execution.checkpointing.incremental", "true");
        conf.put("execution.checkpointing.num-retained", "1");
        conf.put("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION");
        conf.put("restart-strategy.type", "none");
        conf.put("taskmanager.memory.managed.size", "256m");
        // Flink's usual setting for a keyed aggregate over a stream (and its
        // Nexmark setup): updates folded per key for up to 1 s, as
        // Millpond folds them per epoch.
        conf.put("table.exec.mini-batch.enabled", "true");
        conf.put("table.exec.mini-batch.allow-latency", "1 s");
        conf.put("table.exec.mini-batch.size", "5000");
        conf.putAll(overrides);

        Configuration configuration = Configuration.fromMap(conf);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(configuration);
        StreamTableEnvironment tEnv = StreamTableEnvironment.create(env,
                EnvironmentSettings.newInstance().inStreamingMode().withConfiguration(configuration).build());
        tEnv.executeSql("CREATE TEMPORARY TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT) WITH ("
                + "'connector' = 'kafka', 'topic' = '" + input + "', 'properties.bootstrap.servers' = '" + brokers
                + "', 'properties.group.id' = 'flink-bench', 'properties.isolation.level' = 'read_committed',"
                + " 'scan.startup.mode' = 'earliest-offset', 'scan.bounded.mode' = 'latest-offset',"
                + " 'format' = 'json')");
        // The broker's transaction.max.timeout.ms is 15 min; the connector's default is 1 h.
        tEnv.executeSql("CREATE TEMPORARY TABLE bid_stats (auction BIGINT, bids BIGINT, volume BIGINT, top BIGINT,"
                + " PRIMARY KEY (auction) NOT ENFORCED) WITH ("
                + "'connector' = 'upsert-kafka', 'topic' = '" + sink + "', 'properties.bootstrap.servers' = '"
                + brokers + "', 'key.format' = 'json', 'value.format' = 'json',"
                + " 'sink.delivery-guarantee' = 'exactly-once', 'sink.transactional-id-prefix' = 'flink-" + sink
                + "', 'properties.transaction.timeout.ms' = '600000',"
                + " 'properties.linger.ms' = '20', 'properties.compression.type' = 'lz4')");
        TableResult result = tEnv.executeSql("INSERT INTO bid_stats SELECT auction, COUNT(*), SUM(price),"
                + " MAX(price) FROM bid GROUP BY auction");
        long submitted = System.nanoTime();
        JobExecutionResult job = result.getJobClient().orElseThrow().getJobExecutionResult().get();
        long ended = System.nanoTime();
        double seconds = job.getNetRuntime() / 1000.0;
        System.out.printf("RESULT parallelism=%d events=%d seconds=%.2f after_submit_seconds=%.2f"
                        + " startup_seconds=%.2f events_per_s_per_core=%.0f checkpoints=%d%n",
                parallelism, events, seconds, (ended - submitted) / 1e9, (submitted - started) / 1e9,
                events / seconds / parallelism, lastCheckpoint(checkpointDir));
        System.exit(0);
    }

    /** The highest completed checkpoint id under `dir` (chk-N directories), 0 if none. */
    static long lastCheckpoint(Path dir) throws IOException {
        long[] last = {0};
        if (!Files.exists(dir)) {
            return 0;
        }
        Files.walkFileTree(dir, new SimpleFileVisitor<>() {
            @Override
            public FileVisitResult preVisitDirectory(Path d, BasicFileAttributes attrs) {
                String name = d.getFileName().toString();
                if (name.startsWith("chk-")) {
                    last[0] = Math.max(last[0], Long.parseLong(name.substring(4)));
                }
                return FileVisitResult.CONTINUE;
            }

            @Override
            public FileVisitResult visitFileFailed(Path file, IOException e) throws IOException {
                if (e instanceof NoSuchFileException) {
                    return FileVisitResult.CONTINUE;
                }
                throw e;
            }
        });
        return last[0];
    }
}
