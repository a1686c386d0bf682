# Sourced by the benchmark scripts (from the repository's root): a scratch folder in $work, and
# every process whose pid a script adds to $pids, both gone when the script ends however it ends.
work=$(mktemp -d)
pids=""
cleanup() {
    for pid in $pids; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT INT TERM
