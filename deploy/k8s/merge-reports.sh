#!/usr/bin/env bash
# Collects the report of every pod of the loadgen Job (loadgen/job.yaml: an Indexed Job, one pod per
# completion index) and merges them with `loadgen merge`, which adds the pods' HDR latency histograms and
# recomputes every percentile from the sum (exact, never an average of percentiles), and adds the counts.
# Prints one line per pod, the spread of their start times, then the merged report (text); keeps the pods'
# logs, their JSON reports and merged.json in OUT_DIR.
#
# Usage: deploy/k8s/merge-reports.sh [JOB]        JOB defaults to loadgen
# Environment:
#   NAMESPACE     namespace of the Job (rust-baselines)
#   KUBECTL       kubectl command (kubectl)
#   LOADGEN       loadgen binary, e.g. target/release/loadgen (loadgen on PATH; build it with
#                 `cargo build --release -p loadgen`)
#   OUT_DIR       where to keep the logs and reports (a new temporary directory)
#   WAIT_SECONDS  how long to wait for the Job to finish (900)
#
# A Job with a failed pod is refused: a failed run (a non-200 answer, say) must not disappear into a sum.
set -euo pipefail

job="${1:-loadgen}"
namespace="${NAMESPACE:-rust-baselines}"
kubectl="${KUBECTL:-kubectl}"
loadgen="${LOADGEN:-loadgen}"
wait_seconds="${WAIT_SECONDS:-900}"

die() {
  echo "merge-reports: $*" >&2
  exit 1
}
k() { "$kubectl" --namespace "$namespace" "$@"; }

command -v "$loadgen" >/dev/null 2>&1 ||
  die "$loadgen not found: cargo build --release -p loadgen, then LOADGEN=target/release/loadgen"
command -v "$kubectl" >/dev/null 2>&1 || die "$kubectl not found"

mode="$(k get job "$job" -o 'jsonpath={.spec.completionMode}')"
[ "$mode" = "Indexed" ] ||
  die "job/$job in namespace $namespace is not an Indexed Job (completionMode: ${mode:-NonIndexed})"
completions="$(k get job "$job" -o 'jsonpath={.spec.completions}')"
[[ "$completions" =~ ^[1-9][0-9]*$ ]] || die "job/$job has no usable spec.completions (${completions:-none})"

# Wait until every index has succeeded, or any pod has failed.
deadline=$((SECONDS + wait_seconds))
while :; do
  status="$(k get job "$job" -o 'jsonpath={.status.succeeded},{.status.failed}')"
  succeeded="${status%%,*}"
  failed="${status#*,}"
  succeeded="${succeeded:-0}"
  failed="${failed:-0}"
  if [ "$failed" -gt 0 ]; then
    die "$failed pod(s) of job/$job failed; see:" \
      "$kubectl --namespace $namespace logs -l batch.kubernetes.io/job-name=$job"
  fi
  [ "$succeeded" -ge "$completions" ] && break
  [ "$SECONDS" -lt "$deadline" ] ||
    die "job/$job not finished after ${wait_seconds}s ($succeeded of $completions succeeded)"
  echo "merge-reports: waiting for job/$job ($succeeded of $completions succeeded)" >&2
  sleep 5
done

out="${OUT_DIR:-}"
if [ -z "$out" ]; then
  out="$(mktemp -d "${TMPDIR:-/tmp}/loadgen-$job.XXXXXX")"
fi
mkdir -p "$out"

# The top-level number field NAME of a pretty-printed loadgen report (two-space indent at the top level).
field() { sed -n "s/^  \"$1\": \([0-9.]*\),\{0,1\}\$/\1/p" "$2" | head -n 1; }

reports=()
first_start=""
last_start=""
for ((index = 0; index < completions; index++)); do
  selector="batch.kubernetes.io/job-name=$job,batch.kubernetes.io/job-completion-index=$index"
  pods="$(k get pods -l "$selector" --field-selector=status.phase=Succeeded -o 'jsonpath={.items[*].metadata.name}')"
  read -r -a names <<<"$pods"
  [ "${#names[@]}" -eq 1 ] ||
    die "expected one succeeded pod for index $index of job/$job, found ${#names[@]}: ${pods:-none}"
  pod="${names[0]}"
  log="$out/log-$index.txt"
  report="$out/report-$index.json"
  k logs "pod/$pod" >"$log"
  # The log holds loadgen's text summary, then the JSON report from a line "{" to the next line "}" (the only
  # unindented braces in it; see --json in loadgen/job.yaml).
  awk '$0 == "{" { inside = 1 } inside { print } inside && $0 == "}" { exit }' "$log" >"$report"
  [ "$(tail -n 1 "$report" 2>/dev/null)" = "}" ] || die "no JSON report in the log of pod $pod (index $index): $log"
  started="$(field started_unix_ms "$report")"
  responses="$(field responses "$report")"
  [ -n "$started" ] || die "$report has no started_unix_ms"
  echo "index $index  pod $pod  started_unix_ms $started  responses ${responses:-?}"
  if [ -z "$first_start" ] || [ "$started" -lt "$first_start" ]; then first_start="$started"; fi
  if [ -z "$last_start" ] || [ "$started" -gt "$last_start" ]; then last_start="$started"; fi
  reports+=("$report")
done
echo "start spread: $((last_start - first_start)) ms between the first and the last pod's measured window"
echo

"$loadgen" merge --latency --json "$out/merged.json" "${reports[@]}"
echo
echo "logs, reports and merged.json: $out"
