# Shared by run.sh and check.sh (sourced): the JSON-lines dump, the build and
# the java command line.

# dump_input MILLPOND_BINARY DATA_DIR OUT: copies DATA_DIR (so that a millpond
# process holding it is not disturbed) and writes each topic partition's
# record values to OUT/TOPIC/part-P.json, once: a dump whose .complete names
# the same DATA_DIR is reused.
dump_input() {
  local bin=$1 data=$2 input=$3 topic partitions p
  if [ "$(cat "$input/.complete" 2>/dev/null)" = "$data" ]; then
    return
  fi
  echo "dumping $data to $input" >&2
  rm -rf "$input" "$input.copy"
  mkdir -p "$input"
  cp -r "$data" "$input.copy"
  for topic in person auction bid; do
    mkdir -p "$input/$topic"
    partitions=$("$bin" --data-dir "$input.copy" topic describe "$topic" --json |
      python3 -c 'import json,sys; p=json.load(sys.stdin)["partitions"]; print(len(p) if isinstance(p,list) else p)')
    for ((p = 0; p < partitions; p++)); do
      "$bin" --data-dir "$input.copy" consume "$topic" --partition "$p" --format raw >"$input/$topic/part-$p.json"
    done
    echo "  $topic: $partitions partitions, $(cat "$input/$topic"/*.json | wc -l) records" >&2
  done
  rm -rf "$input.copy"
  echo "$data" >"$input/.complete"
}

# The runner's jar (target/$FLINK_JAR.jar) and main class: NexmarkFlink's by
# default; benches/kafka/flink/run.sh sets its own.
FLINK_JAR=${FLINK_JAR:-nexmark-flink}
FLINK_MAIN=${FLINK_MAIN:-millpond.bench.NexmarkFlink}

# build_jar DIR: target/$FLINK_JAR.jar and target/lib/ under DIR, if missing
# or older than the sources.
build_jar() {
  if [ ! -f "$1/target/$FLINK_JAR.jar" ] || [ ! -d "$1/target/lib" ] ||
    [ -n "$(find "$1/pom.xml" "$1/src" -newer "$1/target/$FLINK_JAR.jar" -print -quit)" ]; then
    echo "building $1/target/$FLINK_JAR.jar" >&2
    # shellcheck disable=SC2086
    (cd "$1" && mvn -B -q -Dstyle.color=never ${MVN_ARGS:-} package)
  fi
}

# flink_java DIR ARGS...: runs $FLINK_MAIN in a fresh JVM, with the flags
# Flink's own config.yaml gives Java 17 (env.java.opts.all). Its temporary
# files (each JVM unpacks a 22 MB RPC jar, and System.exit skips the clean-up)
# go to $FLINK_TMP, emptied first.
flink_java() {
  local dir=$1 tmp=${FLINK_TMP:-/tmp/flink-nexmark-tmp}
  shift
  rm -rf "$tmp"
  mkdir -p "$tmp"
  "${JAVA:-java}" -Xms"${JAVA_HEAP:-4g}" -Xmx"${JAVA_HEAP:-4g}" -Djava.io.tmpdir="$tmp" \
    --add-exports=java.base/sun.net.util=ALL-UNNAMED \
    --add-exports=java.rmi/sun.rmi.registry=ALL-UNNAMED \
    --add-exports=jdk.compiler/com.sun.tools.javac.api=ALL-UNNAMED \
    --add-exports=jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED \
    --add-exports=jdk.compiler/com.sun.tools.javac.parser=ALL-UNNAMED \
    --add-exports=jdk.compiler/com.sun.tools.javac.tree=ALL-UNNAMED \
    --add-exports=jdk.compiler/com.sun.tools.javac.util=ALL-UNNAMED \
    --add-exports=java.security.jgss/sun.security.krb5=ALL-UNNAMED \
    --add-opens=java.base/java.lang=ALL-UNNAMED \
    --add-opens=java.base/java.net=ALL-UNNAMED \
    --add-opens=java.base/java.io=ALL-UNNAMED \
    --add-opens=java.base/java.nio=ALL-UNNAMED \
    --add-opens=java.base/sun.nio.ch=ALL-UNNAMED \
    --add-opens=java.base/java.lang.reflect=ALL-UNNAMED \
    --add-opens=java.base/java.text=ALL-UNNAMED \
    --add-opens=java.base/java.time=ALL-UNNAMED \
    --add-opens=java.base/java.util=ALL-UNNAMED \
    --add-opens=java.base/java.util.concurrent=ALL-UNNAMED \
    --add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED \
    --add-opens=java.base/java.util.concurrent.locks=ALL-UNNAMED \
    -cp "$dir/target/$FLINK_JAR.jar:$dir/target/lib/*" "$FLINK_MAIN" "$@"
}
