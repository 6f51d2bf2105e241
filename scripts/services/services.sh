#!/usr/bin/env bash
# inboxkit's own test services, without Docker: PostgreSQL 15, RabbitMQ, Kafka 3.9 (KRaft), ElasticMQ (SQS), Redis,
# NATS (JetStream).
#
#   services.sh up      [NAME...]   start (idempotent), wait until ready, write .services/env; prints
#                                   `started NAME` on stdout for each service it started (not found running)
#   services.sh down    [NAME...]   stop cleanly
#   services.sh restart NAME...     stop then start (for chaos tests), waits until ready
#   services.sh status  [NAME...]   print each service up/down with its address (exit 1 if any is down)
#   services.sh env                 print the resolved connection settings (.services/env)
#   services.sh deps    [NAME...]   install what the services need (apt packages, Maven jars) and exit
#   services.sh check   [NAME...]   say what `up` would install or fetch first; exit 3, with the command to run,
#                                   when system packages are missing and cannot be installed (not root)
#   services.sh stop-after PID [NAME...]   wait until process PID is gone, then stop NAME (for `npm test`)
#
# NAME is one of: postgres rabbitmq kafka elasticmq redis nats (default: all). Everything listens on 127.0.0.1 only.
# INBOXKIT_NO_INSTALL=1 never runs apt-get, even as root: missing packages are an error that names them.
# State, logs and pids live in the repo's ignored .services/ folder (Postgres' data may live under
# /var/tmp/inboxkit-<hash> when the repo path is not reachable by the `postgres` user). See README.md here.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
STATE="${INBOXKIT_SERVICES_DIR:-$ROOT/.services}"
ALL_SERVICES=(postgres rabbitmq kafka elasticmq redis nats)
# One id per checkout: names the RabbitMQ node and the fallback Postgres folder, so that two clones on one
# machine (a developer's and CI's) never share state.
CHECKOUT_ID="$(printf '%s' "$ROOT" | sha1sum | cut -c1-10)"

# ---------------------------------------------------------------------------------------------- logging
_now() { date +%s.%N; }
_elapsed() { awk -v a="$1" -v b="$(_now)" 'BEGIN { printf "%.1fs", b - a }'; }
log() { printf '[services %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}

# --------------------------------------------------------------------------------------------- settings
# Ports: an explicit env var wins; else the port this checkout used before (.services/ports.env); else the
# default. When a port that was not set explicitly is taken by a process that is not ours (for example the
# services of another checkout), or claimed by another checkout (see claim_ports: its service may just be down
# for a restart), `up` moves the whole service to the next free block (+10, +20, ...). `restart` never moves:
# the tests running against the service hold its address.
declare -A DEFAULT_PORT=(
  [INBOXKIT_PG_PORT]=54329
  [INBOXKIT_AMQP_PORT]=5679
  [INBOXKIT_RABBITMQ_DIST_PORT]=25679
  [INBOXKIT_KAFKA_PORT]=19092
  [INBOXKIT_KAFKA_CONTROLLER_PORT]=19093
  [INBOXKIT_SQS_PORT]=19324
  [INBOXKIT_REDIS_PORT]=16379
  [INBOXKIT_NATS_PORT]=14222
  [INBOXKIT_NATS_MONITOR_PORT]=18222
)
declare -A SERVICE_PORT_VARS=(
  [postgres]="INBOXKIT_PG_PORT"
  [rabbitmq]="INBOXKIT_AMQP_PORT INBOXKIT_RABBITMQ_DIST_PORT"
  [kafka]="INBOXKIT_KAFKA_PORT INBOXKIT_KAFKA_CONTROLLER_PORT"
  [elasticmq]="INBOXKIT_SQS_PORT"
  [redis]="INBOXKIT_REDIS_PORT"
  [nats]="INBOXKIT_NATS_PORT INBOXKIT_NATS_MONITOR_PORT"
)
declare -A EXPLICIT=()
for _var in "${!DEFAULT_PORT[@]}"; do
  if [[ -n "${!_var:-}" ]]; then EXPLICIT[$_var]=1; fi
done
PORTS_FILE="$STATE/ports.env"
if [[ -f "$PORTS_FILE" ]]; then
  while IFS='=' read -r _k _v; do
    [[ -n "$_k" && -n "${DEFAULT_PORT[$_k]:-}" && -z "${EXPLICIT[$_k]:-}" ]] && printf -v "$_k" '%s' "$_v"
  done <"$PORTS_FILE"
fi
for _var in "${!DEFAULT_PORT[@]}"; do
  if [[ -z "${!_var:-}" ]]; then printf -v "$_var" '%s' "${DEFAULT_PORT[$_var]}"; fi
done

PG_BIN="${INBOXKIT_PG_BIN:-/usr/lib/postgresql/15/bin}"
PG_DB="${INBOXKIT_PG_DATABASE:-inboxkit}"
KAFKA_HEAP="${INBOXKIT_KAFKA_HEAP:--Xms256m -Xmx512m}"
ELASTICMQ_HEAP="${INBOXKIT_ELASTICMQ_HEAP:--Xms64m -Xmx256m}"
RABBITMQ_NODE="${INBOXKIT_RABBITMQ_NODE:-inboxkit-$CHECKOUT_ID@localhost}"
READY_TIMEOUT="${INBOXKIT_SERVICES_TIMEOUT:-120}"
# nats-server is built once from the Go module proxy (`go install`) into .services/nats/bin, or taken from
# INBOXKIT_NATS_SERVER (a binary you have).
NATS_VERSION="${INBOXKIT_NATS_VERSION:-v2.15.3}"

mkdir -p "$STATE/logs" "$STATE/run"

save_ports() {
  local tmp="$PORTS_FILE.tmp" var
  : >"$tmp"
  for var in $(printf '%s\n' "${!DEFAULT_PORT[@]}" | sort); do printf '%s=%s\n' "$var" "${!var}" >>"$tmp"; done
  mv "$tmp" "$PORTS_FILE"
}

# --------------------------------------------------------------------------------------------- helpers
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

pid_alive() { [[ -n "${1:-}" ]] && kill -0 "$1" 2>/dev/null; }

read_pid() { [[ -f "$1" ]] && tr -dc '0-9' <"$1" || true; }

wait_for() { # wait_for DESCRIPTION TIMEOUT_S COMMAND... : retry COMMAND every 0.5 s
  local what="$1" timeout="$2" start
  shift 2
  start=$(date +%s)
  until "$@" >/dev/null 2>&1; do
    if (($(date +%s) - start >= timeout)); then return 1; fi
    sleep 0.5
  done
}

stop_pid() { # stop_pid PID NAME [TIMEOUT]: SIGTERM, wait, SIGKILL as a last resort
  local pid="$1" name="$2" timeout="${3:-60}" i
  pid_alive "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < timeout * 5; i++)); do
    pid_alive "$pid" || return 0
    sleep 0.2
  done
  log "$name (pid $pid) did not stop in ${timeout}s: SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
  sleep 0.5
}

# ------------------------------------------------------------------------------------------ port claims
# Every port a checkout's service uses is claimed in a registry shared by all checkouts on the machine: a file
# named after the port that holds the claiming checkout's state folder. A claim stays while the service is
# stopped (a restart stops it for a while): another checkout's `up` skips the port even when nothing listens on
# it, so it never takes over the address that the first checkout's tests and tools hold. A claim lapses when its
# folder's ports.env no longer names the port (the checkout moved, or was deleted).
PORT_REGISTRY="${INBOXKIT_PORT_REGISTRY:-${TMPDIR:-/tmp}/inboxkit-ports}"

registry_lock() { # registry_lock COMMAND...: runs COMMAND holding the registry's lock (fd 8)
  if [[ ! -d "$PORT_REGISTRY" ]]; then
    mkdir -p "$PORT_REGISTRY" || die "cannot create the port registry $PORT_REGISTRY (INBOXKIT_PORT_REGISTRY)"
    chmod 1777 "$PORT_REGISTRY" 2>/dev/null || true
  fi
  (
    flock -w 60 8 || die "the port registry $PORT_REGISTRY stays locked"
    "$@"
  ) 8>"$PORT_REGISTRY/.lock"
}

# The state folder of the other checkout that claims PORT, if its claim is live; nothing otherwise.
port_claimed_by_other() {
  local port="$1" owner
  [[ -f "$PORT_REGISTRY/$port" ]] || return 1
  owner="$(cat "$PORT_REGISTRY/$port" 2>/dev/null || true)"
  [[ -n "$owner" && "$owner" != "$STATE" ]] || return 1
  grep -qx "[A-Z_]*=$port" "$owner/ports.env" 2>/dev/null || return 1
  echo "$owner"
}

claim_ports() { # claim_ports PORT...: records this checkout as the owner of each PORT
  local port
  for port in "$@"; do
    # A stale claim file of another user cannot be replaced in the sticky registry: say so, and go on.
    { printf '%s\n' "$STATE" >"$PORT_REGISTRY/$port"; } 2>/dev/null ||
      log "cannot claim port $port in $PORT_REGISTRY (a stale claim of another user?): other checkouts may take it while it is stopped"
  done
}

# Claims the ports of a service that runs (started before claims existed, or its claim file was removed).
claim_service_ports() { # claim_service_ports SERVICE
  local var ports=""
  for var in ${SERVICE_PORT_VARS[$1]}; do ports+=" ${!var}"; done
  # shellcheck disable=SC2086
  registry_lock claim_ports $ports
}

# Resolve ports for a service that is not running: keep them when free for us, else (unless set explicitly, or
# MOVE=no for a restart) move to the next block where all of the service's ports are free for us; then claim
# them. Runs under the registry lock, so two checkouts starting at once never pick the same block.
resolve_ports() { registry_lock _resolve_ports "$@" || exit 1; _reload_ports; }

_resolve_ports() {
  local svc="$1" move="${2:-yes}" vars offset var busy explicit="" port owner ports
  vars="${SERVICE_PORT_VARS[$svc]}"
  for var in $vars; do [[ -n "${EXPLICIT[$var]:-}" ]] && explicit=1; done
  for ((offset = 0; offset <= 300; offset += 10)); do
    busy=""
    for var in $vars; do
      port=$((${!var} + offset))
      if owner="$(port_claimed_by_other "$port")"; then
        busy="$var=$port, claimed by the checkout whose state is $owner"
      elif port_open "$port"; then
        busy="$var=$port, in use by another process"
      fi
    done
    if [[ -z "$busy" ]]; then
      if ((offset > 0)); then
        for var in $vars; do printf -v "$var" '%s' $((${!var} + offset)); done
        log "$svc: its ports are taken or claimed by another checkout; using $(for var in $vars; do printf '%s=%s ' "$var" "${!var}"; done)"
      fi
      save_ports
      ports=""
      for var in $vars; do ports+=" ${!var}"; done
      # shellcheck disable=SC2086
      claim_ports $ports
      return 0
    fi
    if [[ -n "$explicit" ]]; then
      die "$svc: port ${busy#*=} ($busy). Stop it or choose another port."
    fi
    if [[ "$move" == no ]]; then
      die "$svc: cannot start again on its port ($busy) and will not move during a restart: the tests and tools using it hold that address. Stop what took the port, or run \`services.sh up $svc\` to move it."
    fi
  done
  die "$svc: no free port block found near ${vars}"
}

# resolve_ports runs in a subshell (the lock): read back the ports it chose.
_reload_ports() {
  local _k _v
  while IFS='=' read -r _k _v; do
    [[ -n "$_k" && -n "${DEFAULT_PORT[$_k]:-}" ]] && printf -v "$_k" '%s' "$_v"
  done <"$PORTS_FILE"
}

# `restart` sets this: its start must not move the service to other ports.
RESOLVE_MOVE=yes

# ------------------------------------------------------------------------------------------ dependencies
APT_UPDATED=""
apt_install() {
  local missing=("$@")
  ((${#missing[@]})) || return 0
  if ! can_install; then die "$(cannot_install_message "${missing[@]}")"; fi
  local t
  t=$(_now)
  if [[ -z "$APT_UPDATED" ]]; then
    log "apt-get update"
    apt-get update -qq >"$STATE/logs/apt.log" 2>&1 || { tail -20 "$STATE/logs/apt.log" >&2; die "apt-get update failed"; }
    APT_UPDATED=1
  fi
  log "apt-get install ${missing[*]}"
  # RUNLEVEL=1 keeps Debian's maintainer scripts from starting the system-wide rabbitmq/postgres services.
  if ! DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 apt-get install -y -qq --no-install-recommends "${missing[@]}" \
    >>"$STATE/logs/apt.log" 2>&1; then
    tail -30 "$STATE/logs/apt.log" >&2
    die "apt-get install ${missing[*]} failed (log: $STATE/logs/apt.log)"
  fi
  log "apt-get install done in $(_elapsed "$t")"
}

# Whether this run may install system packages: as root, with apt-get, unless INBOXKIT_NO_INSTALL=1.
can_install() {
  [[ $EUID -eq 0 && "${INBOXKIT_NO_INSTALL:-}" != 1 ]] && command -v apt-get >/dev/null
}

cannot_install_message() { # cannot_install_message PACKAGE...
  local why="not root"
  if [[ $EUID -eq 0 ]]; then
    if [[ "${INBOXKIT_NO_INSTALL:-}" == 1 ]]; then why="INBOXKIT_NO_INSTALL=1"; else why="no apt-get"; fi
  fi
  printf 'missing system packages: %s (%s). Install them with: sudo apt-get update && sudo apt-get install -y --no-install-recommends %s' \
    "$*" "$why" "$*"
}

missing_system_packages() { # missing_system_packages SERVICE...: prints the Debian packages to install
  local svc pkgs=()
  for svc in "$@"; do
    case "$svc" in
    postgres)
      [[ -x "$PG_BIN/postgres" ]] || pkgs+=(postgresql-15)
      ;;
    rabbitmq)
      [[ -x /usr/lib/rabbitmq/bin/rabbitmq-server ]] || pkgs+=(rabbitmq-server)
      ;;
    redis)
      command -v redis-server >/dev/null || pkgs+=(redis-server)
      ;;
    kafka | elasticmq)
      command -v java >/dev/null || pkgs+=(openjdk-17-jre-headless)
      command -v mvn >/dev/null || pkgs+=(maven)
      ;;
    esac
  done
  command -v runuser >/dev/null || pkgs+=(util-linux)
  command -v curl >/dev/null || pkgs+=(curl)
  ((${#pkgs[@]} == 0)) || printf '%s\n' "${pkgs[@]}" | sort -u | paste -sd' ' -
}

ensure_system_packages() { # ensure_system_packages SERVICE...
  local pkgs=()
  read -ra pkgs <<<"$(missing_system_packages "$@")"
  apt_install "${pkgs[@]}"
}

# Maven jars a service needs that are not in place yet (a missing or stale lib folder): prints the services.
missing_jars() { # missing_jars SERVICE...
  local svc pom lib out=()
  for svc in "$@"; do
    case "$svc" in
    kafka | elasticmq)
      pom="$SCRIPT_DIR/$svc/pom.xml"
      lib="$STATE/$svc/lib"
      if [[ ! -f "$lib/.complete" || "$(cat "$lib/.complete")" != "$(sha1sum "$pom" | cut -c1-40)" ]]; then out+=("$svc"); fi
      ;;
    esac
  done
  ((${#out[@]} == 0)) || echo "${out[*]}"
}

# Services whose binary must be built first (nats-server, from the Go module proxy): prints them.
missing_binaries() { # missing_binaries SERVICE...
  local svc
  for svc in "$@"; do
    if [[ "$svc" == nats ]]; then
      nats_paths
      [[ -x "$NATS_BIN" ]] || echo nats
    fi
  done
}

# Maven: copy a pom's runtime dependencies into a lib folder, once (a marker records the pom's hash).
maven_lib() { # maven_lib NAME POM LIBDIR
  local name="$1" pom="$2" lib="$3" hash t
  hash="$(sha1sum "$pom" | cut -c1-40)"
  if [[ -f "$lib/.complete" && "$(cat "$lib/.complete")" == "$hash" ]]; then return 0; fi
  t=$(_now)
  log "$name: resolving jars from Maven Central into ${lib#"$ROOT"/}"
  rm -rf "$lib"
  mkdir -p "$lib"
  if ! mvn -B -q -f "$pom" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$lib" \
    >"$STATE/logs/$name-maven.log" 2>&1; then
    tail -30 "$STATE/logs/$name-maven.log" >&2
    die "$name: Maven could not resolve $pom (log: $STATE/logs/$name-maven.log)"
  fi
  printf '%s' "$hash" >"$lib/.complete"
  log "$name: $(find "$lib" -name '*.jar' | wc -l) jars in $(_elapsed "$t")"
}

# ============================================================================================ PostgreSQL
# initdb and postgres refuse to run as root: as root they run as the `postgres` user.
pg_as() {
  # 9>&-: daemons must not inherit the lock fd (they would hold the lock for ever).
  # From /, which the postgres user can always enter (the checkout may be under /root).
  if [[ $EUID -eq 0 ]]; then (cd / && runuser -u postgres -- "$@" 9>&-); else "$@" 9>&-; fi
}

# Where the cluster lives: .services/postgres when the postgres user can reach it, else a folder under
# /var/tmp named after this checkout (.services/postgres is then a symlink to it).
pg_base() {
  local dir="$STATE/postgres"
  if [[ -L "$dir" ]]; then
    readlink -f "$dir"
    return
  fi
  if [[ $EUID -ne 0 || -d "$dir/data" ]]; then
    mkdir -p "$dir"
    echo "$dir"
    return
  fi
  mkdir -p "$dir"
  chown postgres: "$dir"
  if runuser -u postgres -- test -w "$dir" 2>/dev/null; then
    echo "$dir"
    return
  fi
  rmdir "$dir"
  local alt="/var/tmp/inboxkit-$CHECKOUT_ID/postgres"
  mkdir -p "$alt"
  chmod 755 "/var/tmp/inboxkit-$CHECKOUT_ID"
  chown postgres: "$alt"
  ln -s "$alt" "$dir"
  echo "$alt"
}

pg_paths() {
  PG_BASE="$(pg_base)"
  PG_DATA="$PG_BASE/data"
  PG_LOG="$PG_BASE/postgres.log"
  ln -sfn "$PG_LOG" "$STATE/logs/postgres.log"
}

pg_pid() { [[ -f "$PG_DATA/postmaster.pid" ]] && head -1 "$PG_DATA/postmaster.pid" | tr -dc '0-9' || true; }

pg_ready() { "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$INBOXKIT_PG_PORT" -U postgres -d postgres; }

pg_running() { pid_alive "$(pg_pid)"; }

postgres_up() {
  pg_paths
  if pg_running; then
    # postmaster.pid line 4 is the port it listens on.
    local running_port
    running_port="$(sed -n 4p "$PG_DATA/postmaster.pid" | tr -dc '0-9')"
    if [[ -n "$running_port" && "$running_port" != "$INBOXKIT_PG_PORT" ]]; then
      INBOXKIT_PG_PORT="$running_port"
      save_ports
    fi
    wait_for postgres "$READY_TIMEOUT" pg_ready || die "postgres: pid $(pg_pid) is alive but not ready (log: $PG_LOG)"
    log "postgres: already running on 127.0.0.1:$INBOXKIT_PG_PORT"
  else
    resolve_ports postgres "$RESOLVE_MOVE"
    if [[ ! -f "$PG_DATA/PG_VERSION" ]]; then
      local t
      t=$(_now)
      log "postgres: initdb ${PG_DATA}"
      rm -rf "$PG_DATA"
      pg_as mkdir -p "$PG_DATA"
      pg_as "$PG_BIN/initdb" -D "$PG_DATA" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 \
        >"$STATE/logs/postgres-initdb.log" 2>&1 || {
        cat "$STATE/logs/postgres-initdb.log" >&2
        die "postgres: initdb failed"
      }
      # Our settings go in an included file, so that they can be changed and re-applied on every start.
      echo "include_if_exists = 'inboxkit.conf'" | pg_as tee -a "$PG_DATA/postgresql.conf" >/dev/null
      log "postgres: initdb done in $(_elapsed "$t")"
    fi
    # Rewritten on each start. Loopback only; trust for loopback connections; fsync stays on so that
    # benchmarks are honest.
    pg_as tee "$PG_DATA/inboxkit.conf" >/dev/null <<EOF
# Written by scripts/services/services.sh on each start; edit that script instead.
listen_addresses = '127.0.0.1'
port = $INBOXKIT_PG_PORT
unix_socket_directories = ''
max_connections = 300
shared_buffers = 256MB
fsync = on
synchronous_commit = on
max_prepared_transactions = 50
log_min_messages = warning
log_line_prefix = '%m [%p] %q%u@%d '
log_lock_waits = on
lc_messages = 'C'
EOF
    pg_as tee "$PG_DATA/pg_hba.conf" >/dev/null <<'EOF'
# Written by scripts/services/services.sh: password-less access on loopback only.
# TYPE  DATABASE        USER            ADDRESS                 METHOD
host    all             all             127.0.0.1/32            trust
host    replication     all             127.0.0.1/32            trust
EOF
    local t
    t=$(_now)
    log "postgres: starting on 127.0.0.1:$INBOXKIT_PG_PORT"
    pg_as "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_LOG" -w -t "$READY_TIMEOUT" -s start >/dev/null ||
      {
        tail -20 "$PG_LOG" >&2
        die "postgres: did not start (log: $PG_LOG)"
      }
    wait_for "postgres" "$READY_TIMEOUT" pg_ready || die "postgres: not ready after ${READY_TIMEOUT}s (log: $PG_LOG)"
    log "postgres: ready in $(_elapsed "$t")"
    STARTED=1
  fi
  pg_ensure_db
}

pg_ensure_db() {
  local exists
  exists="$("$PG_BIN/psql" -h 127.0.0.1 -p "$INBOXKIT_PG_PORT" -U postgres -d postgres -tAc \
    "select 1 from pg_database where datname = '$PG_DB'")"
  if [[ "$exists" != "1" ]]; then
    "$PG_BIN/createdb" -h 127.0.0.1 -p "$INBOXKIT_PG_PORT" -U postgres "$PG_DB"
    log "postgres: created database $PG_DB"
  fi
}

postgres_down() {
  pg_paths
  if ! pg_running; then
    log "postgres: not running"
    return 0
  fi
  local t
  t=$(_now)
  pg_as "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w -t 60 -s stop || {
    log "postgres: fast shutdown failed, trying immediate"
    pg_as "$PG_BIN/pg_ctl" -D "$PG_DATA" -m immediate -w -t 30 -s stop || true
  }
  log "postgres: stopped in $(_elapsed "$t")"
}

postgres_status() {
  pg_paths
  if pg_running && pg_ready; then
    echo "postgres   up    postgres://postgres@127.0.0.1:$INBOXKIT_PG_PORT/$PG_DB   (pid $(pg_pid), data $PG_DATA)"
  else
    echo "postgres   down  postgres://postgres@127.0.0.1:$INBOXKIT_PG_PORT/$PG_DB"
    return 1
  fi
}

# ============================================================================================== RabbitMQ
# Debian's /usr/sbin/rabbitmq-* wrappers switch to the `rabbitmq` user and the system-wide node. We run the
# real scripts directly instead, with every path, the node name, the ports and the Erlang cookie (HOME) set to
# this checkout's .services/rabbitmq, so the node is ours alone. .services/bin/rabbitmqctl wraps the CLI.
RMQ_SBIN=""
rabbit_paths() {
  RMQ_DIR="$STATE/rabbitmq"
  if [[ -z "$RMQ_SBIN" ]]; then
    RMQ_SBIN="$(find /usr/lib/rabbitmq/lib -maxdepth 2 -type d -name sbin -path '*rabbitmq_server-*' 2>/dev/null |
      sort -V | tail -1)"
  fi
  RMQ_PIDFILE="$STATE/run/rabbitmq.pid"
  RMQ_CTL="$STATE/bin/rabbitmqctl"
}

rabbit_env() {
  export HOME="$RMQ_DIR/home"
  export RABBITMQ_NODENAME="$RABBITMQ_NODE"
  export RABBITMQ_MNESIA_BASE="$RMQ_DIR/mnesia"
  export RABBITMQ_LOG_BASE="$STATE/logs/rabbitmq"
  export RABBITMQ_CONFIG_FILE="$RMQ_DIR/rabbitmq.conf"
  export RABBITMQ_ENABLED_PLUGINS_FILE="$RMQ_DIR/enabled_plugins"
  export RABBITMQ_CONF_ENV_FILE="$RMQ_DIR/rabbitmq-env.conf"
  export RABBITMQ_ADVANCED_CONFIG_FILE="$RMQ_DIR/advanced.config"
  export RABBITMQ_PID_FILE="$RMQ_PIDFILE"
  export ERL_EPMD_ADDRESS=127.0.0.1
  export RABBITMQ_CTL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
}

write_rabbit_files() {
  mkdir -p "$RMQ_DIR/home" "$RMQ_DIR/mnesia" "$STATE/logs/rabbitmq" "$STATE/bin"
  cat >"$RMQ_DIR/rabbitmq.conf" <<EOF
# Written by scripts/services/services.sh on each start.
listeners.tcp.1 = 127.0.0.1:$INBOXKIT_AMQP_PORT
distribution.listener.interface = 127.0.0.1
distribution.listener.port_range.min = $INBOXKIT_RABBITMQ_DIST_PORT
distribution.listener.port_range.max = $INBOXKIT_RABBITMQ_DIST_PORT
loopback_users.guest = true
log.file.level = info
log.console = false
EOF
  echo '[].' >"$RMQ_DIR/enabled_plugins"
  echo '[].' >"$RMQ_DIR/advanced.config"
  : >"$RMQ_DIR/rabbitmq-env.conf"
  # The CLI wrapper tests use to reach (and restart) this node.
  cat >"$RMQ_CTL" <<EOF
#!/usr/bin/env bash
# rabbitmqctl for inboxkit's RabbitMQ node (written by scripts/services/services.sh).
export HOME='$RMQ_DIR/home' ERL_EPMD_ADDRESS=127.0.0.1
export RABBITMQ_CTL_ERL_ARGS='-kernel inet_dist_use_interface {127,0,0,1}'
exec '$RMQ_SBIN/rabbitmqctl' -n '$RABBITMQ_NODE' "\$@"
EOF
  chmod +x "$RMQ_CTL"
}

rabbit_ctl() { "$RMQ_SBIN/rabbitmqctl" -n "$RABBITMQ_NODE" "$@" 9>&-; }

rabbit_pid() { read_pid "$RMQ_PIDFILE"; }

rabbit_running() {
  pid_alive "$(rabbit_pid)" && return 0
  # No pid file (deleted, or a crash during start-up) but our node answers: adopt it.
  if port_open "$INBOXKIT_AMQP_PORT" && [[ -n "${HOME:-}" && "$HOME" == "$RMQ_DIR/home" ]] &&
    epmd -names 2>/dev/null | grep -q "^name ${RABBITMQ_NODE%@*} "; then
    local pid
    pid="$(rabbit_ctl -q eval 'os:getpid().' 2>/dev/null | tr -dc '0-9')"
    if pid_alive "$pid"; then
      echo "$pid" >"$RMQ_PIDFILE"
      return 0
    fi
  fi
  return 1
}

# Cheap check (no Erlang CLI, which takes seconds to boot on a busy machine): the AMQP listener answers.
rabbit_answers() { port_open "$INBOXKIT_AMQP_PORT" && node "$SCRIPT_DIR/probe.mjs" amqp "127.0.0.1:$INBOXKIT_AMQP_PORT"; }

rabbitmq_up() {
  rabbit_paths
  [[ -n "$RMQ_SBIN" ]] || die "rabbitmq: rabbitmq-server is not installed (apt-get install rabbitmq-server)"
  rabbit_env
  if rabbit_running; then
    write_rabbit_files
    if wait_for rabbitmq 30 rabbit_answers; then
      log "rabbitmq: already running on 127.0.0.1:$INBOXKIT_AMQP_PORT (node $RABBITMQ_NODE)"
      return 0
    fi
    die "rabbitmq: pid $(rabbit_pid) is alive but the node does not answer (log: $STATE/logs/rabbitmq)"
  fi
  resolve_ports rabbitmq "$RESOLVE_MOVE"
  write_rabbit_files
  local t
  t=$(_now)
  log "rabbitmq: starting node $RABBITMQ_NODE on 127.0.0.1:$INBOXKIT_AMQP_PORT"
  rm -f "$RMQ_PIDFILE"
  (cd "$RMQ_DIR" && "$RMQ_SBIN/rabbitmq-server" -detached >"$STATE/logs/rabbitmq-startup.log" 2>&1 9>&-) ||
    die "rabbitmq: rabbitmq-server -detached failed (log: $STATE/logs/rabbitmq-startup.log)"
  # -detached returns at once; the node registers with epmd a moment later, boots, and opens the AMQP
  # listener last. Then the CLI confirms the boot is complete.
  if ! wait_for rabbitmq "$READY_TIMEOUT" rabbit_answers ||
    ! rabbit_ctl -q await_startup --timeout "$READY_TIMEOUT" >/dev/null 2>&1; then
    tail -20 "$STATE/logs/rabbitmq/$RABBITMQ_NODE.log" >&2 2>/dev/null || true
    die "rabbitmq: not ready after ${READY_TIMEOUT}s (logs: $STATE/logs/rabbitmq)"
  fi
  rabbit_ctl -q eval 'os:getpid().' | tr -dc '0-9' >"$RMQ_PIDFILE"
  # Quorum queues, streams etc. need the stable feature flags on.
  rabbit_ctl -q enable_feature_flag all >/dev/null
  log "rabbitmq: ready in $(_elapsed "$t") (pid $(rabbit_pid))"
  STARTED=1
}

rabbitmq_down() {
  rabbit_paths
  [[ -n "$RMQ_SBIN" ]] || return 0
  rabbit_env
  if ! rabbit_running; then
    log "rabbitmq: not running"
    rm -f "$RMQ_PIDFILE"
    return 0
  fi
  local t pid
  t=$(_now)
  pid="$(rabbit_pid)"
  rabbit_ctl -q shutdown --timeout 60 >/dev/null 2>&1 || stop_pid "$pid" rabbitmq 30
  stop_pid "$pid" rabbitmq 10
  rm -f "$RMQ_PIDFILE"
  # epmd is started on demand by Erlang and shared by all nodes; stop it when no node uses it any more.
  if command -v epmd >/dev/null && ! epmd -names 2>/dev/null | grep -q '^name '; then
    epmd -kill >/dev/null 2>&1 9>&- || true
  fi
  log "rabbitmq: stopped in $(_elapsed "$t")"
}

rabbitmq_status() {
  rabbit_paths
  local url="amqp://guest:guest@127.0.0.1:$INBOXKIT_AMQP_PORT"
  if [[ -n "$RMQ_SBIN" ]] && rabbit_running && port_open "$INBOXKIT_AMQP_PORT"; then
    echo "rabbitmq   up    $url   (pid $(rabbit_pid), node $RABBITMQ_NODE)"
  else
    echo "rabbitmq   down  $url"
    return 1
  fi
}

# ================================================================================================= Kafka
kafka_paths() {
  KAFKA_DIR="$STATE/kafka"
  KAFKA_LIB="$KAFKA_DIR/lib"
  KAFKA_PIDFILE="$STATE/run/kafka.pid"
}

kafka_pid() { read_pid "$KAFKA_PIDFILE"; }
kafka_running() { pid_alive "$(kafka_pid)"; }
kafka_ready() { node "$SCRIPT_DIR/probe.mjs" kafka "127.0.0.1:$INBOXKIT_KAFKA_PORT"; }

write_kafka_files() {
  mkdir -p "$KAFKA_DIR/data" "$STATE/logs/kafka"
  cat >"$KAFKA_DIR/server.properties" <<EOF
# Written by scripts/services/services.sh on each start: single-node KRaft broker + controller, loopback only.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$INBOXKIT_KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$INBOXKIT_KAFKA_PORT,CONTROLLER://127.0.0.1:$INBOXKIT_KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$INBOXKIT_KAFKA_PORT
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$KAFKA_DIR/data
auto.create.topics.enable=true
delete.topic.enable=true
num.partitions=3
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=10
group.initial.rebalance.delay.ms=0
num.network.threads=3
num.io.threads=4
log.retention.hours=24
log.segment.bytes=104857600
EOF
  cat >"$KAFKA_DIR/log4j.properties" <<EOF
# Written by scripts/services/services.sh.
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.RollingFileAppender
log4j.appender.file.File=$STATE/logs/kafka/server.log
log4j.appender.file.MaxFileSize=20MB
log4j.appender.file.MaxBackupIndex=3
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.org.apache.kafka.controller=INFO
log4j.logger.state.change.logger=WARN
EOF
}

kafka_java() { # kafka_java MAIN ARGS... (foreground)
  java -Xms64m -Xmx256m -Dlog4j.configuration="file:$KAFKA_DIR/log4j.properties" \
    -cp "$KAFKA_LIB/*" "$@" 9>&-
}

kafka_up() {
  kafka_paths
  if kafka_running; then
    if wait_for kafka 30 kafka_ready; then
      log "kafka: already running on 127.0.0.1:$INBOXKIT_KAFKA_PORT"
      return 0
    fi
    die "kafka: pid $(kafka_pid) is alive but the broker does not answer (log: $STATE/logs/kafka/server.log)"
  fi
  maven_lib kafka "$SCRIPT_DIR/kafka/pom.xml" "$KAFKA_LIB"
  resolve_ports kafka "$RESOLVE_MOVE"
  write_kafka_files
  local t
  if [[ ! -f "$KAFKA_DIR/data/meta.properties" ]]; then
    t=$(_now)
    local cluster_id
    cluster_id="$(kafka_java kafka.tools.StorageTool random-uuid 2>/dev/null | tail -1)"
    [[ -n "$cluster_id" ]] || die "kafka: StorageTool random-uuid failed"
    kafka_java kafka.tools.StorageTool format -t "$cluster_id" -c "$KAFKA_DIR/server.properties" \
      >"$STATE/logs/kafka-format.log" 2>&1 || {
      cat "$STATE/logs/kafka-format.log" >&2
      die "kafka: storage format failed"
    }
    log "kafka: formatted storage (cluster $cluster_id) in $(_elapsed "$t")"
  fi
  t=$(_now)
  log "kafka: starting on 127.0.0.1:$INBOXKIT_KAFKA_PORT (controller $INBOXKIT_KAFKA_CONTROLLER_PORT)"
  # shellcheck disable=SC2086
  setsid nohup java $KAFKA_HEAP -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true \
    -Dlog4j.configuration="file:$KAFKA_DIR/log4j.properties" -Dkafka.logs.dir="$STATE/logs/kafka" \
    -cp "$KAFKA_LIB/*" kafka.Kafka "$KAFKA_DIR/server.properties" \
    >"$STATE/logs/kafka/stdout.log" 2>&1 </dev/null 9>&- &
  echo $! >"$KAFKA_PIDFILE"
  local start
  start=$(date +%s)
  until kafka_ready >/dev/null 2>&1; do
    kafka_running || {
      tail -30 "$STATE/logs/kafka/server.log" "$STATE/logs/kafka/stdout.log" >&2 2>/dev/null || true
      die "kafka: the broker exited during start-up (logs: $STATE/logs/kafka)"
    }
    (($(date +%s) - start < READY_TIMEOUT)) || die "kafka: not ready after ${READY_TIMEOUT}s (logs: $STATE/logs/kafka)"
    sleep 0.5
  done
  log "kafka: ready in $(_elapsed "$t") (pid $(kafka_pid))"
  STARTED=1
}

kafka_down() {
  kafka_paths
  if ! kafka_running; then
    log "kafka: not running"
    rm -f "$KAFKA_PIDFILE"
    return 0
  fi
  local t
  t=$(_now)
  stop_pid "$(kafka_pid)" kafka 60
  rm -f "$KAFKA_PIDFILE"
  log "kafka: stopped in $(_elapsed "$t")"
}

kafka_status() {
  kafka_paths
  if kafka_running && port_open "$INBOXKIT_KAFKA_PORT"; then
    echo "kafka      up    127.0.0.1:$INBOXKIT_KAFKA_PORT   (pid $(kafka_pid), controller 127.0.0.1:$INBOXKIT_KAFKA_CONTROLLER_PORT)"
  else
    echo "kafka      down  127.0.0.1:$INBOXKIT_KAFKA_PORT"
    return 1
  fi
}

# ============================================================================================= ElasticMQ
elasticmq_paths() {
  EMQ_DIR="$STATE/elasticmq"
  EMQ_LIB="$EMQ_DIR/lib"
  # Queues and messages live here, in an H2 database, so a restart keeps both, as a broker restart should: the
  # chaos tests restart ElasticMQ under live queues.
  EMQ_DATA="$EMQ_DIR/data"
  EMQ_PIDFILE="$STATE/run/elasticmq.pid"
}

elasticmq_pid() { read_pid "$EMQ_PIDFILE"; }
elasticmq_running() { pid_alive "$(elasticmq_pid)"; }
elasticmq_ready() {
  curl -fsS -m 3 -o /dev/null "http://127.0.0.1:$INBOXKIT_SQS_PORT/?Action=ListQueues&Version=2012-11-05"
}

write_elasticmq_files() {
  mkdir -p "$EMQ_DIR" "$EMQ_DATA" "$STATE/logs"
  cat >"$EMQ_DIR/elasticmq.conf" <<EOF
# Written by scripts/services/services.sh on each start.
include classpath("application.conf")

node-address {
  protocol = http
  host = 127.0.0.1
  port = $INBOXKIT_SQS_PORT
  context-path = ""
}
generate-node-address = false

rest-sqs {
  enabled = true
  bind-port = $INBOXKIT_SQS_PORT
  bind-hostname = "127.0.0.1"
  sqs-limits = strict
}

rest-stats {
  enabled = false
}

# Persistent storage (ElasticMQ 1.7: the SQL message storage keeps the queues, with their attributes and
# redrive policies, and their messages, with receive counts). Messages received but not deleted are visible
# again after a restart, as after a visibility timeout.
messages-storage {
  enabled = true
  uri = "jdbc:h2:$EMQ_DATA/messages"
}

aws {
  region = us-east-1
  accountId = 000000000000
}
EOF
  cat >"$EMQ_DIR/logback.xml" <<EOF
<configuration>
  <!-- Written by scripts/services/services.sh. -->
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>$STATE/logs/elasticmq.log</file>
    <encoder><pattern>%d{HH:mm:ss.SSS} %-5level %logger{36} - %msg%n</pattern></encoder>
  </appender>
  <logger name="org.apache.pekko" level="WARN"/>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
EOF
}

elasticmq_up() {
  elasticmq_paths
  if elasticmq_running; then
    if wait_for elasticmq 30 elasticmq_ready; then
      log "elasticmq: already running on 127.0.0.1:$INBOXKIT_SQS_PORT"
      return 0
    fi
    die "elasticmq: pid $(elasticmq_pid) is alive but does not answer (log: $STATE/logs/elasticmq.log)"
  fi
  maven_lib elasticmq "$SCRIPT_DIR/elasticmq/pom.xml" "$EMQ_LIB"
  resolve_ports elasticmq "$RESOLVE_MOVE"
  write_elasticmq_files
  local t start
  t=$(_now)
  log "elasticmq: starting on 127.0.0.1:$INBOXKIT_SQS_PORT"
  # shellcheck disable=SC2086
  setsid nohup java $ELASTICMQ_HEAP -Djava.awt.headless=true -Dconfig.file="$EMQ_DIR/elasticmq.conf" \
    -Dlogback.configurationFile="$EMQ_DIR/logback.xml" -cp "$EMQ_LIB/*" org.elasticmq.server.Main \
    >"$STATE/logs/elasticmq-stdout.log" 2>&1 </dev/null 9>&- &
  echo $! >"$EMQ_PIDFILE"
  start=$(date +%s)
  until elasticmq_ready >/dev/null 2>&1; do
    elasticmq_running || {
      tail -30 "$STATE/logs/elasticmq.log" "$STATE/logs/elasticmq-stdout.log" >&2 2>/dev/null || true
      die "elasticmq: exited during start-up (logs: $STATE/logs/elasticmq*.log)"
    }
    (($(date +%s) - start < READY_TIMEOUT)) || die "elasticmq: not ready after ${READY_TIMEOUT}s"
    sleep 0.3
  done
  log "elasticmq: ready in $(_elapsed "$t") (pid $(elasticmq_pid))"
  STARTED=1
}

elasticmq_down() {
  elasticmq_paths
  if ! elasticmq_running; then
    log "elasticmq: not running"
    rm -f "$EMQ_PIDFILE"
    return 0
  fi
  local t
  t=$(_now)
  stop_pid "$(elasticmq_pid)" elasticmq 30
  rm -f "$EMQ_PIDFILE"
  log "elasticmq: stopped in $(_elapsed "$t")"
}

elasticmq_status() {
  elasticmq_paths
  if elasticmq_running && port_open "$INBOXKIT_SQS_PORT"; then
    echo "elasticmq  up    http://127.0.0.1:$INBOXKIT_SQS_PORT   (pid $(elasticmq_pid), SQS API, region us-east-1)"
  else
    echo "elasticmq  down  http://127.0.0.1:$INBOXKIT_SQS_PORT"
    return 1
  fi
}

# ================================================================================================= Redis
# Debian's redis-server, run directly (not the system-wide service): loopback only, no persistence (the fast
# path is a cache in front of the Postgres inbox: losing it costs speed, never correctness), state in .services.
redis_paths() {
  REDIS_DIR="$STATE/redis"
  REDIS_PIDFILE="$STATE/run/redis.pid"
}

redis_pid() { read_pid "$REDIS_PIDFILE"; }
redis_running() { pid_alive "$(redis_pid)"; }
redis_ready() { [[ "$(redis-cli -h 127.0.0.1 -p "$INBOXKIT_REDIS_PORT" ping 2>/dev/null)" == "PONG" ]]; }

redis_up() {
  redis_paths
  if redis_running; then
    if wait_for redis 30 redis_ready; then
      log "redis: already running on 127.0.0.1:$INBOXKIT_REDIS_PORT"
      return 0
    fi
    die "redis: pid $(redis_pid) is alive but does not answer (log: $STATE/logs/redis.log)"
  fi
  command -v redis-server >/dev/null || die "redis: redis-server is not installed (apt-get install redis-server)"
  resolve_ports redis "$RESOLVE_MOVE"
  mkdir -p "$REDIS_DIR"
  cat >"$REDIS_DIR/redis.conf" <<EOF
# Written by scripts/services/services.sh on each start.
bind 127.0.0.1
port $INBOXKIT_REDIS_PORT
protected-mode yes
daemonize yes
pidfile $REDIS_PIDFILE
logfile $STATE/logs/redis.log
dir $REDIS_DIR
save ""
appendonly no
maxmemory 256mb
maxmemory-policy allkeys-lru
EOF
  local t
  t=$(_now)
  log "redis: starting on 127.0.0.1:$INBOXKIT_REDIS_PORT"
  rm -f "$REDIS_PIDFILE"
  redis-server "$REDIS_DIR/redis.conf" 9>&- || die "redis: redis-server failed to start (log: $STATE/logs/redis.log)"
  wait_for redis "$READY_TIMEOUT" redis_ready || die "redis: not ready after ${READY_TIMEOUT}s (log: $STATE/logs/redis.log)"
  log "redis: ready in $(_elapsed "$t") (pid $(redis_pid))"
  STARTED=1
}

redis_down() {
  redis_paths
  if ! redis_running; then
    log "redis: not running"
    rm -f "$REDIS_PIDFILE"
    return 0
  fi
  local t
  t=$(_now)
  stop_pid "$(redis_pid)" redis 30
  rm -f "$REDIS_PIDFILE"
  log "redis: stopped in $(_elapsed "$t")"
}

redis_status() {
  redis_paths
  if redis_running && port_open "$INBOXKIT_REDIS_PORT"; then
    echo "redis      up    redis://127.0.0.1:$INBOXKIT_REDIS_PORT   (pid $(redis_pid))"
  else
    echo "redis      down  redis://127.0.0.1:$INBOXKIT_REDIS_PORT"
    return 1
  fi
}

# ================================================================================================== NATS
# nats-server with JetStream, built once with `go install github.com/nats-io/nats-server/v2@$NATS_VERSION` into
# .services/nats/bin (a marker names the version; a second `up` starts it at once). JetStream's file storage
# lives in .services/nats/jetstream, so a restart keeps streams, consumers and messages, as a broker restart
# should: the chaos tests restart it under live consumers. Loopback only, no auth; monitoring (health) on its own
# port.
nats_paths() {
  NATS_DIR="$STATE/nats"
  NATS_STORE="$NATS_DIR/jetstream"
  NATS_PIDFILE="$STATE/run/nats.pid"
  if [[ -n "${INBOXKIT_NATS_SERVER:-}" ]]; then NATS_BIN="$INBOXKIT_NATS_SERVER"; else NATS_BIN="$NATS_DIR/bin/nats-server"; fi
}

nats_pid() { read_pid "$NATS_PIDFILE"; }
nats_running() { pid_alive "$(nats_pid)"; }
# /healthz answers 200 once the server accepts clients and JetStream is ready (its streams recovered).
nats_ready() { curl -fsS -m 3 -o /dev/null "http://127.0.0.1:$INBOXKIT_NATS_MONITOR_PORT/healthz"; }

nats_binary() { # builds nats-server once (GOBIN=.services/nats/bin); a marker holds the version built
  nats_paths
  if [[ -n "${INBOXKIT_NATS_SERVER:-}" ]]; then
    [[ -x "$NATS_BIN" ]] || die "nats: INBOXKIT_NATS_SERVER=$NATS_BIN is not an executable"
    return 0
  fi
  if [[ -x "$NATS_BIN" && "$(cat "$NATS_DIR/bin/.version" 2>/dev/null)" == "$NATS_VERSION" ]]; then return 0; fi
  command -v go >/dev/null ||
    die "nats: nats-server is built with Go (go install github.com/nats-io/nats-server/v2@$NATS_VERSION), and go is not installed. Install Go ≥ 1.21 (it fetches the go 1.26 toolchain that nats-server $NATS_VERSION needs from the module proxy; Debian 12's golang-go 1.19 is too old), or set INBOXKIT_NATS_SERVER to a nats-server binary."
  local t
  t=$(_now)
  log "nats: go install github.com/nats-io/nats-server/v2@$NATS_VERSION into ${NATS_DIR#"$ROOT"/}/bin"
  mkdir -p "$NATS_DIR/bin"
  if ! (cd / && GOBIN="$NATS_DIR/bin" GOFLAGS=-buildvcs=false go install "github.com/nats-io/nats-server/v2@$NATS_VERSION") \
    >"$STATE/logs/nats-build.log" 2>&1 9>&-; then
    tail -30 "$STATE/logs/nats-build.log" >&2
    die "nats: go install failed (log: $STATE/logs/nats-build.log)"
  fi
  printf '%s' "$NATS_VERSION" >"$NATS_DIR/bin/.version"
  log "nats: nats-server $NATS_VERSION built in $(_elapsed "$t")"
}

nats_up() {
  nats_paths
  if nats_running; then
    if wait_for nats 30 nats_ready; then
      log "nats: already running on 127.0.0.1:$INBOXKIT_NATS_PORT"
      return 0
    fi
    die "nats: pid $(nats_pid) is alive but does not answer (log: $STATE/logs/nats.log)"
  fi
  nats_binary
  resolve_ports nats "$RESOLVE_MOVE"
  mkdir -p "$NATS_DIR" "$NATS_STORE"
  cat >"$NATS_DIR/nats.conf" <<EOF
# Written by scripts/services/services.sh on each start.
server_name: inboxkit_$CHECKOUT_ID
host: 127.0.0.1
port: $INBOXKIT_NATS_PORT
http: "127.0.0.1:$INBOXKIT_NATS_MONITOR_PORT"
max_payload: 1MB
jetstream {
  store_dir: "$NATS_STORE"
  max_memory_store: 256MB
  max_file_store: 4GB
}
EOF
  local t start
  t=$(_now)
  log "nats: starting on 127.0.0.1:$INBOXKIT_NATS_PORT (JetStream store ${NATS_STORE#"$ROOT"/})"
  setsid nohup "$NATS_BIN" -c "$NATS_DIR/nats.conf" >"$STATE/logs/nats.log" 2>&1 </dev/null 9>&- &
  echo $! >"$NATS_PIDFILE"
  start=$(date +%s)
  until nats_ready >/dev/null 2>&1; do
    nats_running || {
      tail -30 "$STATE/logs/nats.log" >&2 2>/dev/null || true
      die "nats: exited during start-up (log: $STATE/logs/nats.log)"
    }
    (($(date +%s) - start < READY_TIMEOUT)) || die "nats: not ready after ${READY_TIMEOUT}s (log: $STATE/logs/nats.log)"
    sleep 0.2
  done
  log "nats: ready in $(_elapsed "$t") (pid $(nats_pid))"
  STARTED=1
}

nats_down() {
  nats_paths
  if ! nats_running; then
    log "nats: not running"
    rm -f "$NATS_PIDFILE"
    return 0
  fi
  local t
  t=$(_now)
  # SIGTERM: JetStream flushes its file store and stops cleanly.
  stop_pid "$(nats_pid)" nats 30
  rm -f "$NATS_PIDFILE"
  log "nats: stopped in $(_elapsed "$t")"
}

nats_status() {
  nats_paths
  if nats_running && port_open "$INBOXKIT_NATS_PORT"; then
    echo "nats       up    nats://127.0.0.1:$INBOXKIT_NATS_PORT   (pid $(nats_pid), JetStream, monitoring :$INBOXKIT_NATS_MONITOR_PORT)"
  else
    echo "nats       down  nats://127.0.0.1:$INBOXKIT_NATS_PORT"
    return 1
  fi
}

# =============================================================================================== env file
write_env() {
  rabbit_paths
  local tmp="$STATE/env.tmp"
  cat >"$tmp" <<EOF
# Connection settings of inboxkit's own services (written by scripts/services/services.sh up).
# Test discovery (test/support/global-setup.ts) reads this file when the variables are not set.
DATABASE_URL=postgres://postgres@127.0.0.1:$INBOXKIT_PG_PORT/$PG_DB
KAFKA_BROKERS=127.0.0.1:$INBOXKIT_KAFKA_PORT
AMQP_URL=amqp://guest:guest@127.0.0.1:$INBOXKIT_AMQP_PORT
SQS_ENDPOINT=http://127.0.0.1:$INBOXKIT_SQS_PORT
SQS_REGION=us-east-1
REDIS_URL=redis://127.0.0.1:$INBOXKIT_REDIS_PORT
NATS_URL=nats://127.0.0.1:$INBOXKIT_NATS_PORT
RABBITMQ_CTL=$RMQ_CTL
RABBITMQ_NODE=$RABBITMQ_NODE
INBOXKIT_SERVICES_SCRIPT=$SCRIPT_DIR/services.sh
INBOXKIT_SERVICES_DIR=$STATE
INBOXKIT_PG_BIN=$PG_BIN
EOF
  mv "$tmp" "$STATE/env"
}

# ================================================================================================== main
usage() {
  sed -n '2,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
  exit 2
}

pick_services() {
  if (($# == 0)); then
    SELECTED=("${ALL_SERVICES[@]}")
    return
  fi
  SELECTED=()
  local s
  for s in "$@"; do
    case "$s" in
    postgres | pg | postgresql) SELECTED+=(postgres) ;;
    rabbitmq | rabbit | amqp) SELECTED+=(rabbitmq) ;;
    kafka) SELECTED+=(kafka) ;;
    elasticmq | sqs) SELECTED+=(elasticmq) ;;
    redis) SELECTED+=(redis) ;;
    nats | jetstream) SELECTED+=(nats) ;;
    *) die "unknown service '$s' (one of: ${ALL_SERVICES[*]})" ;;
    esac
  done
}

with_lock() {
  # Serialises up/down/restart of one checkout. Every daemon is started with fd 9 closed (9>&-) so that it
  # does not inherit, and keep, the lock.
  exec 9>"$STATE/run/services.lock"
  if ! flock -w 600 9; then die "another services.sh is still running (lock $STATE/run/services.lock)"; fi
}

cmd="${1:-}"
[[ -n "$cmd" ]] || usage
shift
if [[ "$cmd" == stop-after ]]; then
  WATCH_PID="${1:-}"
  [[ "$WATCH_PID" =~ ^[0-9]+$ ]] || die "stop-after needs a process id"
  shift
fi
pick_services "$@"

case "$cmd" in
up | start)
  with_lock
  T0=$(_now)
  ensure_system_packages "${SELECTED[@]}"
  for s in "${SELECTED[@]}"; do
    STARTED=""
    "${s}_up"
    claim_service_ports "$s"
    # On stdout, for whoever stops what it started (test/support/own-services.ts): a service found running
    # (started meanwhile by a restart, another run, or by hand) is not this call's to stop.
    if [[ -n "$STARTED" ]]; then echo "started $s"; fi
  done
  write_env
  log "up: ${SELECTED[*]} ready in $(_elapsed "$T0"); settings in ${STATE}/env"
  ;;
down | stop)
  with_lock
  T0=$(_now)
  # Reverse order: brokers first, the database last.
  for ((i = ${#SELECTED[@]} - 1; i >= 0; i--)); do "${SELECTED[$i]}_down"; done
  log "down: done in $(_elapsed "$T0")"
  ;;
restart)
  (($# > 0)) || die "restart needs a service name (one of: ${ALL_SERVICES[*]})"
  with_lock
  T0=$(_now)
  ensure_system_packages "${SELECTED[@]}"
  RESOLVE_MOVE=no
  for s in "${SELECTED[@]}"; do
    "${s}_down"
    "${s}_up"
    claim_service_ports "$s"
  done
  write_env
  log "restart: ${SELECTED[*]} ready again in $(_elapsed "$T0")"
  ;;
status)
  rc=0
  for s in "${SELECTED[@]}"; do "${s}_status" || rc=1; done
  exit "$rc"
  ;;
env)
  [[ -f "$STATE/env" ]] || die "no $STATE/env yet: run 'npm run services:up'"
  grep -v '^#' "$STATE/env"
  ;;
check)
  # Lines `install PACKAGE...` and `fetch SERVICE...` say what `up` would do before starting anything;
  # exit 3 with one message when packages are missing and cannot be installed here.
  pkgs="$(missing_system_packages "${SELECTED[@]}")"
  jars="$(missing_jars "${SELECTED[@]}")"
  bins="$(missing_binaries "${SELECTED[@]}" | paste -sd' ' -)"
  if [[ -n "$pkgs" ]] && ! can_install; then
    # shellcheck disable=SC2086
    echo "$(cannot_install_message $pkgs)"
    exit 3
  fi
  if [[ -n "$pkgs" ]]; then echo "install $pkgs"; fi
  if [[ -n "$jars" ]]; then echo "fetch $jars"; fi
  if [[ -n "$bins" ]]; then echo "build $bins"; fi
  ;;
stop-after)
  # A watchdog for services that a test run started: stops them if the run dies without stopping them itself
  # (SIGKILL, a closed terminal). The run kills this watchdog when it stops them on its own.
  while kill -0 "$WATCH_PID" 2>/dev/null; do sleep 1; done
  log "process $WATCH_PID is gone: stopping ${SELECTED[*]}"
  with_lock
  for ((i = ${#SELECTED[@]} - 1; i >= 0; i--)); do "${SELECTED[$i]}_down"; done
  ;;
deps)
  with_lock
  ensure_system_packages "${SELECTED[@]}"
  for s in "${SELECTED[@]}"; do
    case "$s" in
    kafka) kafka_paths && maven_lib kafka "$SCRIPT_DIR/kafka/pom.xml" "$KAFKA_LIB" ;;
    elasticmq) elasticmq_paths && maven_lib elasticmq "$SCRIPT_DIR/elasticmq/pom.xml" "$EMQ_LIB" ;;
    nats) nats_binary ;;
    esac
  done
  ;;
-h | --help | help) usage ;;
*) usage ;;
esac
