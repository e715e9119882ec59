# Sourced by the scripts that start a server of their own (s3.sh, registry.sh, victorialogs.sh) for their --stop.
# stop_pid_file FILE: stops the process whose id FILE holds, and returns once it has exited (SIGTERM, then after
# 10 s SIGKILL), so that whoever stops it may then remove or unmount its data folder: a process still exiting holds
# its files open (a busy machine takes seconds to end one). FILE goes only once the process has: a stop cut short
# leaves it, and the next stop finds the process still there.
stop_pid_file() {
  local file=$1 pid
  [ -f "$file" ] || return 0
  pid=$(cat "$file")
  if kill "$pid" 2>/dev/null; then
    exited_within 100 "$pid" || { kill -9 "$pid" 2>/dev/null || true; exited_within 50 "$pid" || true; }
  fi
  rm -f "$file"
}

# exited_within STEPS PID: whether PID has exited within STEPS tenths of a second.
exited_within() {
  for _ in $(seq "$1"); do
    kill -0 "$2" 2>/dev/null || return 0
    sleep 0.1
  done
  return 1
}
