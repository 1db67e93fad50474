// Compiled Hyperscan databases kept on disk between runs (Matcher::compile
// with a CompileCache), so that every start of the agent and every CLI
// command does not compile the same pack again. Only bytes here: Hyperscan's
// own (de)serialisation stays in matcher.cpp.
//
// A file is used only when all of these hold, else it is compiled anew and
// the file replaced: it is owned by this user and writable by no one else
// (the file opened, not the path looked at), it starts with this format's
// magic, it was made for the same key (the SHA-256 of Hyperscan's version
// and every expression, flag and id compiled), and its closing SHA-256
// covers every byte before it. Hyperscan then checks each database's own
// header when it deserialises it.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "gpuguard/common/result.h"

namespace gpuguard::signatures::database_cache {

// The cache file of `key` in `directory`.
std::filesystem::path file_of(const std::filesystem::path& directory, const std::string& key);

// The serialised databases stored under `key` (one entry per field, "" for
// a field without a database), or why the file cannot be used: kNotFound
// when there is none, else a reason naming the file.
Result<std::vector<std::string>> load(const std::filesystem::path& file, const std::string& key);

// Writes the serialised databases under `key`: the directory is created
// (mode 0700) if missing, the file written beside its final name and
// renamed over it, so a reader sees the old file or the new, never half.
Status store(const std::filesystem::path& file, const std::string& key,
             const std::vector<std::string>& databases);

}  // namespace gpuguard::signatures::database_cache
