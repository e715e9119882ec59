# Sourced by the scripts that start a server of their own (s3.sh, registry.sh, victorialogs.sh) for their --stop.
# stop_pid_file FILE: stops the process whose id FILE holds, and returns once it has exited (SIGTERM, then after
# 10 s SIGKILL), so that whoever stops it may then remove or unmount its data folder: a process still exiting holds
# its files open (a busy machine takes seconds to end one).
stop_pid_file() {
  local file=$1 pid
  [ -f "$file" ] || return 0
  pid=$(cat "$file")
  rm -f "$file"
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
  for _ in $(seq 50); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
}
