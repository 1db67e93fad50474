#!/bin/bash
# Checks the include lines of agent/ and the libraries against the room table
# of docs/architecture.md: a room includes only its own headers and the
# public headers of the rooms and libraries below it, never a path that
# climbs out of its folder; libbpf, Hyperscan/YARA, curl and gRPC stay in the one
# place each may be used. Prints every offending line as FILE:LINE: why, and
# exits 1 when there is one.
#   scripts/check-rooms.sh [SOURCE_ROOT]
set -u
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root" || exit 2

# What each room may include (below it, transitively), besides itself and common.
declare -A may_use=(
    [events]="bpf_abi"
    [state]="events"
    [netintel]="events"
    [journal]="events"
    [sensor]="events bpf_abi bpf_skel libbpf"
    [detect]="state netintel journal events rules signatures"
    [enforce]="state events rules"
    [daemon]="events state netintel journal sensor detect enforce rules signatures siem backends kubelet"
    [cli]="events state netintel journal sensor detect enforce daemon rules signatures siem backends kubelet"
    [rules]="signatures"
    [signatures]="hyperscan_yara"
    [siem]="curl"
    [kubelet]="grpc"
    [backends]=""
    [common]=""
)
rooms="events state netintel journal sensor detect enforce daemon cli"
libraries="rules signatures siem backends kubelet common"

problems=0
report() {
    echo "$1: $2"
    problems=$((problems + 1))
}

# check_file FILE OWNER: each include line of FILE against what OWNER may use.
check_file() {
    local file=$1 owner=$2 allowed=" ${may_use[$2]} $2 common " number=0 line target what
    # The folder of its own private headers: agent/ROOM for a room, LIBRARY/ for a library.
    local home=$owner
    [[ " $rooms " == *" $owner "* ]] && home=agent/$owner
    while IFS= read -r line; do
        number=$((number + 1))
        [[ $line =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*([\"\<])([^\"\>]+) ]] || continue
        target=${BASH_REMATCH[2]}
        if [[ ${BASH_REMATCH[1]} == '<' ]]; then
            case $target in
                bpf/*) what=libbpf ;;
                hs/* | hs.h | yara.h | yara/*) what=hyperscan_yara ;;
                curl/*) what=curl ;;
                grpc/* | grpcpp/* | google/protobuf/*) what=grpc ;;
                *) continue ;;
            esac
            [[ $allowed == *" $what "* ]] ||
                report "$file:$number" "<$target>: only $(owner_of "$what") may use it"
            continue
        fi
        if [[ $target == *..* ]]; then
            report "$file:$number" "\"$target\" climbs out of its folder"
            continue
        fi
        case $target in
            gpuguard/version.h) continue ;;
            gpuguard/*/*)
                what=${target#gpuguard/}
                what=${what%%/*}
                [[ $allowed == *" $what "* ]] ||
                    report "$file:$number" "\"$target\": $owner may not use $what (docs/architecture.md)"
                ;;
            *.pb.h)
                [[ $allowed == *" grpc "* ]] ||
                    report "$file:$number" "\"$target\": only kubelet/ uses the generated gRPC stubs"
                ;;
            *.skel.h)
                [[ $allowed == *" bpf_skel "* ]] ||
                    report "$file:$number" "\"$target\": only sensor loads BPF skeletons"
                ;;
            events.h | payload.h | enforce_maps.h)
                [[ $allowed == *" bpf_abi "* ]] ||
                    report "$file:$number" "\"$target\": the BPF ABI is for events and sensor"
                ;;
            */*)
                # Root-relative ("siem/format_util.h"): the library's own private header
                # only; or a room's own subfolder ("conditions/condition.h" in detect).
                [[ (${target%%/*} == "$owner" && -f $target) || -f $home/$target ]] ||
                    report "$file:$number" "\"$target\": a private header of ${target%%/*}"
                ;;
            *)
                # Beside the file, or at its room's own top (from a subfolder of it).
                [[ -f $(dirname "$file")/$target || -f $home/$target ]] ||
                    report "$file:$number" "\"$target\" is not beside $file (a private header of another folder?)"
                ;;
        esac
    done <"$file"
}

owner_of() {
    case $1 in
        libbpf) echo "agent/sensor" ;;
        hyperscan_yara) echo "signatures/" ;;
        curl) echo "siem/" ;;
        grpc) echo "kubelet/" ;;
    esac
}

checked=0
for room in $rooms; do
    [[ -d agent/$room ]] || { report "agent/$room" "room missing"; continue; }
    while IFS= read -r file; do
        check_file "$file" "$room"
        checked=$((checked + 1))
    done < <(find "agent/$room" -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.in' \) | sort)
done
for library in $libraries; do
    while IFS= read -r file; do
        check_file "$file" "$library"
        checked=$((checked + 1))
    done < <(find "$library" "include/gpuguard/$library" -type f \( -name '*.cpp' -o -name '*.h' \) \
                 2>/dev/null | sort)
done
stray=$(find agent -maxdepth 1 -type f \( -name '*.cpp' -o -name '*.h' \) | head -5)
[[ -z $stray ]] || report "agent/" "sources outside a room: $stray"

if ((problems > 0)); then
    echo "check-rooms: $problems include(s) against the room table in $checked files"
    exit 1
fi
echo "check-rooms: $checked files, every include within the room table"
