# Step timings for the scripts that run several long steps (ci-extra.sh, test-aarch64.sh), sourced
# by them after setting timings_title (the report's heading) and timings_width (the names' column):
#   timed NAME CMD...   runs CMD and records how long it took;
#   record NAME T0      records a step timed by hand, from T0 ($SECONDS then);
# and at exit, whatever the status, one line per step recorded and the total.
timings=()
t_start=$SECONDS
record() { timings+=("$(printf "%-${timings_width}s %5ds" "$1" $((SECONDS - $2)))"); }
timed() {
  local name=$1 t0=$SECONDS
  shift
  "$@"
  record "$name" "$t0"
}
report() {
  echo "$timings_title: timings"
  for t in "${timings[@]}"; do echo "  $t"; done
  echo "  $(printf "%-${timings_width}s %5ds" total $((SECONDS - t_start)))"
}
trap report EXIT
