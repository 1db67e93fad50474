#!/bin/bash
# scripts/check-rooms.sh must fail on each kind of include the room table
# forbids, and pass the same tree once it is fixed. Runs on a small tree of
# its own under a temporary directory.
set -u
checker=$1
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
for room in events state netintel journal sensor detect enforce daemon cli; do
    mkdir -p "$tree/agent/$room/include/gpuguard/$room"
done
mkdir -p "$tree/common"
echo '#pragma once' >"$tree/agent/state/include/gpuguard/state/process_table.h"
echo '#pragma once' >"$tree/agent/daemon/status_page.h"
good='#include "gpuguard/events/event.h"'
failures=0
expect() {  # expect pass|fail LINE: journal.cpp holding LINE
    printf '%s\n%s\n' "$good" "$2" >"$tree/agent/journal/journal.cpp"
    if bash "$checker" "$tree" >"$tree/out" 2>&1; then got=pass; else got=fail; fi
    if [[ $got != "$1" ]]; then
        echo "expected $1, got $got for: $2"
        cat "$tree/out"
        failures=$((failures + 1))
    fi
}
expect fail '#include "gpuguard/daemon/config.h"'       # up
expect fail '#include "gpuguard/state/process_table.h"'  # sideways
expect fail '#include "../state/process_table.h"'        # out of the folder
expect fail '#include "status_page.h"'                   # another room's private header
expect fail '#include <bpf/libbpf.h>'                    # libbpf outside sensor
expect fail '#include "gpuguard/siem/siem.h"'            # a library the room does not use
expect pass '#include "gpuguard/common/result.h"'
expect pass '#include <vector>'
# A room's own subfolder and, from there, its top: allowed; another room's not.
mkdir -p "$tree/agent/journal/codecs" "$tree/agent/state/codecs"
echo '#pragma once' >"$tree/agent/journal/codecs/codec.h"
echo '#pragma once' >"$tree/agent/state/codecs/table_codec.h"
echo '#pragma once' >"$tree/agent/journal/writer.h"
expect pass '#include "codecs/codec.h"'
expect fail '#include "codecs/table_codec.h"'            # another room's subfolder
printf '%s\n' '#include "writer.h"' >"$tree/agent/journal/codecs/codec.cpp"
expect pass '#include <vector>'
printf '%s\n' '#include "process_table.h"' >"$tree/agent/journal/codecs/codec.cpp"
expect fail '#include <vector>'                          # from a subfolder, not its room's
rm -r "$tree/agent/journal/codecs/codec.cpp"
touch "$tree/agent/stray.cpp"
expect fail '#include <vector>'                          # a source outside every room
rm "$tree/agent/stray.cpp"
((failures == 0)) && echo "check-rooms: every forbidden include caught"
exit $((failures > 0))
