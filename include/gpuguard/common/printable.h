// Text that a monitored process controls (its name, argv, paths, what it
// sent over the network) made safe to print on a terminal or into a
// line-oriented log: it can neither move the cursor, recolour or retitle the
// terminal, nor start a line of its own that looks like ours.
#pragma once

#include <string>
#include <string_view>

namespace gpuguard {

// `text` with every control character written as an escape: \n, \r, \t,
// other C0 bytes and DEL as \xNN, C1 controls (U+0080-U+009F, e.g. the
// one-byte CSI) and the bidirectional overrides that reorder what is shown
// (U+202A-U+202E, U+2066-U+2069, "Trojan Source") as \uNNNN, and bytes that
// are not UTF-8 as \xNN. Printable UTF-8 passes unchanged.
std::string printable(std::string_view text);

}  // namespace gpuguard
