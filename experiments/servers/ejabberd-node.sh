# The ejabberd node of one run of experiments/ejabberd.yaml, rendered per run by the lab
# (server.files) into {output}/ejabberd/{port}/node.sh; only the experiment's factors and the
# lab's built-ins in braces are replaced, the shell's own ${...} stays.
#
#   sh node.sh register     (before_run) a fresh Mnesia spool holding user1..user{accounts}
#   sh node.sh foreground   (the server command) the node itself, in the foreground
#
# The node is started as Debian's `ejabberdctl foreground` starts it (erl -sname NODE ...
# -mnesia dir SPOOL -s ejabberd, with EJABBERD_CONFIG_PATH, EJABBERD_LOG_PATH and ERL_LIBS), but
# directly: `exec` all the way, so the process the lab started, signals and waits for IS the
# Erlang VM (beam.smp), and it gets the lab's PR_SET_PDEATHSIG. It runs as the user running the
# lab: no `su ejabberd`, whose PAM session would reset the descriptor limit to 1,024
# (scripts/ejabberd.sh explains), and nothing to share with another user.
#
# Its own node name, headroom-ejabberd-{port}@localhost, and no distribution port at all
# (-dist_listen false, -start_epmd false): no epmd is started, nothing outlives the node, and two
# runs' nodes cannot collide. Its own directory {output}/ejabberd/{port}: configuration, spool
# and logs.
set -eu
dir="{output}/ejabberd/{port}"
node="headroom-ejabberd-{port}@localhost"
# Where Debian's ejabberdctl finds ejabberd's applications (/usr/lib/<multiarch>).
ERL_LIBS=$(sed -n "s/^ERL_LIBS='\(.*\)'\$/\1/p" /usr/sbin/ejabberdctl)
[ -n "$ERL_LIBS" ] || { echo "node.sh: no ERL_LIBS in /usr/sbin/ejabberdctl" >&2; exit 1; }
EJABBERD_CONFIG_PATH="$dir/ejabberd.yml"
ERL_CRASH_DUMP_BYTES=0
export ERL_LIBS EJABBERD_CONFIG_PATH ERL_CRASH_DUMP_BYTES
cd "$dir"
case "${1:-}" in
register)
  # A fresh spool every run (a port the kernel hands out again must not find the last run's
  # sessions' offline messages), then the accounts: a node of the same name boots ejabberd on
  # it, registers them in-process (ejabberd_auth:try_register/3, the call scripts/ejabberd.sh's
  # hidden node makes over distribution; ~24,000 accounts in a few seconds here) and stops
  # cleanly (init:stop: Mnesia's log is dumped), before the lab starts the node it measures.
  rm -rf spool logs
  mkdir -p spool logs
  export EJABBERD_LOG_PATH="$dir/logs/register.log"
  exec erl -sname "$node" -dist_listen false -start_epmd false -noinput \
    -mnesia dir "\"$dir/spool\"" -s ejabberd -eval "$(cat register.erl)"
  ;;
foreground)
  # The descriptor limit (soft and hard): each client connection takes one, and the node holds
  # ~60 of its own (Mnesia's files, logs, the listener...). The Erlang port limit (+Q,
  # ERL_MAX_PORTS) is 65,536 by default on OTP 25, whatever this limit: the descriptors run out
  # first.
  ulimit -n {fds}
  export EJABBERD_LOG_PATH="$dir/logs/ejabberd.log"
  # +S schedulers (OS threads running Erlang processes), +A async threads, +P process limit;
  # tcpbuf.args: the listening socket's buffers (or none: the kernel's autotuned defaults).
  # No +K: OTP 21+ always polls with epoll (experiments/ejabberd.yaml says why and shows it).
  exec erl -sname "$node" -dist_listen false -start_epmd false -noinput \
    +S {schedulers} +A {async} +P {processes} -args_file "$dir/tcpbuf.args" \
    -mnesia dir "\"$dir/spool\"" -s ejabberd
  ;;
*)
  echo "usage: sh node.sh register|foreground" >&2
  exit 2
  ;;
esac
