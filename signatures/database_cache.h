// Compiled rules kept on disk between runs (Matcher::compile and
// YaraScanner::compile with a CompileCache), so that every start of the
// agent and every CLI command does not compile the same pack again. Only
// bytes here: Hyperscan's and YARA's own (de)serialisation stay in
// matcher.cpp and yara_scanner.cpp.
//
// A file is used only when all of these hold, else it is compiled anew and
// the file replaced: it is owned by this user and writable by no one else
// (the file opened, not the path looked at), it starts with its kind's
// magic, it was made for the same key (the SHA-256 of the library's version
// and everything compiled), and its closing SHA-256 covers every byte
// before it. The library then checks its own header when it loads it.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuguard/common/result.h"

namespace gpuguard::signatures::database_cache {

// What a file holds: it names the file (PREFIX-KEY.db), its magic line, and
// the library in the reasons a file is refused.
struct Kind {
    std::string_view file_prefix;
    std::string_view library;
};
inline constexpr Kind kHyperscan{"hyperscan", "Hyperscan"};
inline constexpr Kind kYara{"yara", "YARA"};

// The cache file of `key` in `directory`.
std::filesystem::path file_of(const std::filesystem::path& directory, const Kind& kind,
                              const std::string& key);

// The serialised databases stored under `key` (for Hyperscan one entry per
// field, "" for a field without a database), or why the file cannot be
// used: kNotFound when there is none, else a reason naming the file.
Result<std::vector<std::string>> load(const std::filesystem::path& file, const Kind& kind,
                                      const std::string& key);

// Writes the serialised databases under `key`: the directory is created
// (mode 0700) if missing, the file written beside its final name and
// renamed over it, so a reader sees the old file or the new, never half.
Status store(const std::filesystem::path& file, const Kind& kind, const std::string& key,
             const std::vector<std::string>& databases);

// What a compile that did not load `file` did with it, in the words of
// Matcher::cache_note: "compiled, stored in FILE", "compiled, not stored:
// why", or with `unused_because` (why an existing file was refused)
// "compiled (why), replaced" / "compiled (why), not replaced: why".
std::string compiled_note(const std::filesystem::path& file, const std::string& unused_because,
                          const Status& stored);

}  // namespace gpuguard::signatures::database_cache
