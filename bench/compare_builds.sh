#!/bin/bash
# Two builds of gpuguard against each other in one run: replay_bench and
# journal_bench of the OLD build (the baseline) and of the NEW one, in
# alternating order, ROUNDS times; for every stage the best round of each
# build and the ratio new/old (above 1: the new build is faster).
#
#   bench/compare_builds.sh OLD_BUILD_DIR NEW_BUILD_DIR [--rounds=N] [--events=N]
#                           [--without=RULE_ID,...]
#
# --without: the rules the new build has and the old one lacks. The new
# build's replay then runs a third time without them, and a second table
# sets the two builds side by side on the same rules: what the new code
# costs, apart from what its new rules cost.
#
# Each build dir needs bench/replay_bench and bench/journal_bench, e.g. for
# the commit before a change:
#   git worktree add /tmp/old <commit> && cmake -S /tmp/old -B /tmp/old/build -G Ninja \
#       -DGPUGUARD_BUILD_TESTS=OFF && ninja -C /tmp/old/build replay_bench journal_bench
# Wall-clock events/s move with whatever else runs on the machine;
# replay_bench's events per CPU-second (the "cpu" rows) move less.
set -euo pipefail
old=${1:?usage: compare_builds.sh OLD_BUILD_DIR NEW_BUILD_DIR [--rounds=N] [--events=N]}
new=${2:?usage: compare_builds.sh OLD_BUILD_DIR NEW_BUILD_DIR [--rounds=N] [--events=N]}
shift 2
rounds=3
events=200000
without=
for arg in "$@"; do
    case $arg in
        --rounds=*) rounds=${arg#--rounds=} ;;
        --events=*) events=${arg#--events=} ;;
        --without=*) without=${arg#--without=} ;;
        *) echo "unknown argument $arg" >&2; exit 2 ;;
    esac
done
for build in "$old" "$new"; do
    for bench in replay_bench journal_bench; do
        [[ -x $build/bench/$bench ]] || { echo "$build/bench/$bench is missing" >&2; exit 2; }
    done
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# run BUILD LABEL [REPLAY_ARGS...]: one round of both benchmarks, as
# "stage<TAB>events/s" lines in $work/LABEL (the "same" label: the replay alone).
run() {
    local build=$1 label=$2
    shift 2
    "$build/bench/replay_bench" --events="$events" --goal=0 --dir="$work/replay-$label" "$@" |
        awk '/^stage /{table=1; next} table && NF>=4 && $(NF-1) ~ /^[0-9.]+$/ {
                 name=$1; for (i=2; i<=NF-3; i++) name=name " " $i;
                 printf "replay: %s\t%s\n", name, $(NF-2);
                 printf "replay: %s (cpu)\t%s\n", name, $NF }' >>"$work/$label"
    [[ $label == same ]] ||
        "$build/bench/journal_bench" --events="$events" --dir="$work/journal-$label" |
        awk '/^BM_/ { printf "journal: %s\t%s\n", $1, $4 }' >>"$work/$label"
    rm -rf "$work/replay-$label" "$work/journal-$label"
}
for ((round = 1; round <= rounds; round++)); do
    if ((round % 2)); then run "$old" old; run "$new" new; else run "$new" new; run "$old" old; fi
    [[ -z $without ]] || run "$new" same --without="$without"
    echo "round $round of $rounds done" >&2
done

# best(LABEL): stage<TAB>the highest events/s of the rounds.
best() {
    awk -F'\t' '{ if (!($1 in top) || $2 > top[$1]) top[$1] = $2; if (!($1 in seen)) { seen[$1] = 1; order[n++] = $1 } }
                END { for (i = 0; i < n; i++) printf "%s\t%s\n", order[i], top[order[i]] }' "$work/$1"
}
echo "old: $old"
echo "new: $new"
echo "$events events, best of $rounds rounds each, alternating"
printf '%-52s %12s %12s %8s\n' "stage (events/s)" "old" "new" "new/old"
join -t $'\t' <(best old | sort -t $'\t' -k1,1) <(best new | sort -t $'\t' -k1,1) |
    sort -t $'\t' -k1,1 |
    awk -F'\t' '{ printf "%-52s %12d %12d %7.2fx\n", $1, $2, $3, ($2 > 0 ? $3 / $2 : 0) }'
if [[ -n $without ]]; then
    echo
    echo "the same rules: the new build without $without"
    printf '%-52s %12s %12s %8s\n' "stage (events/s)" "old" "new" "new/old"
    join -t $'\t' <(best old | sort -t $'\t' -k1,1) <(best same | sort -t $'\t' -k1,1) |
        sort -t $'\t' -k1,1 |
        awk -F'\t' '{ printf "%-52s %12d %12d %7.2fx\n", $1, $2, $3, ($2 > 0 ? $3 / $2 : 0) }'
fi
