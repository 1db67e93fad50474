// The signature pack and its matchers. A pack is a list of Signatures read
// from YAML (signatures/packs/*.yaml) plus YARA sources (signatures/yara/*.yar);
// the built-in pack is embedded in the binary at build time, so it works from
// any directory. Matcher compiles every textual pattern into one Hyperscan
// database per Field; YaraScanner scans executables and files with the YARA
// rules. Neither Hyperscan nor YARA appears in this header.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sys/types.h>

#include "gpuguard/common/result.h"
#include "gpuguard/common/severity.h"
#include "gpuguard/common/sha256.h"

namespace gpuguard::signatures {

// What a textual pattern is matched against; one Hyperscan database each.
enum class Field {
    kProcess,  // process name (comm) or executable path: both are scanned
    kCmdline,  // command line, arguments joined by single spaces
    kConfig,   // content of a file (miner config, systemd unit, crontab)
    kDomain,   // a DNS name the process resolved or connected to
    kPayload,  // bytes of a network payload (stratum JSON-RPC)
};
inline constexpr Field kAllFields[] = {Field::kProcess, Field::kCmdline, Field::kConfig,
                                       Field::kDomain, Field::kPayload};
const char* to_string(Field field);

using gpuguard::parse_severity;
using gpuguard::Severity;
using gpuguard::to_string;  // for Severity

enum class PatternKind {
    kRegex,         // Hyperscan/PCRE syntax, no back-references or look-arounds
    kLiteral,       // matched byte for byte
    kGlob,          // process name glob (* ? [..]); matches comm or the exe's basename
    kDomainSuffix,  // "pool.example" matches itself and any subdomain
};
enum class Anchor { kNone, kStart, kEnd, kBoth };

struct Pattern {
    Field field = Field::kCmdline;
    PatternKind kind = PatternKind::kRegex;
    std::string text;  // as written in the pack
    bool caseless = false;
    Anchor anchor = Anchor::kNone;
};

struct Signature {
    std::string id;  // GG-<FAMILY>-NNNN for the built-in pack
    std::string name;
    std::string description;
    Severity severity = Severity::kWarning;
    double confidence = 0.5;  // 0..1
    std::string mitre;        // ATT&CK technique, e.g. T1496
    std::vector<std::string> references;
    std::vector<std::string> false_positives;
    std::vector<Pattern> patterns;
    std::vector<uint16_t> ports;          // destination ports
    std::vector<std::string> yara_rules;  // names of rules in the pack's YARA sources
    std::vector<std::string> must_match;  // test vectors
    std::vector<std::string> must_not_match;
    std::string source;  // "file:line" where it was declared
};

struct YaraSource {
    std::string name;  // file name, e.g. "xmrig.yar"
    std::string text;
};

struct Pack {
    std::vector<Signature> signatures;
    std::vector<YaraSource> yara_sources;
};

// The pack embedded at build time. Fails only if the embedded text is broken
// (the unit tests make sure it is not).
Result<Pack> load_builtin_pack();
// A pack from a directory laid out like signatures/: packs/*.yaml, yara/*.yar.
Result<Pack> load_pack_directory(const std::filesystem::path& directory);
// One pack YAML document; `source` names it in errors (file:line:col: ...).
Result<Pack> parse_pack_yaml(std::string_view yaml, const std::string& source);

// The expression a pattern compiles to (anchors, escaping and glob rules
// applied), in syntax shared by Hyperscan, PCRE2 and std::regex (ECMAScript).
// A domain suffix yields its kDomain form; `for_cmdline` gives the form that
// finds the domain as a host inside a command line.
std::string pattern_expression(const Pattern& pattern, bool for_cmdline = false);
// Whether Hyperscan accepts `regex`; the error carries Hyperscan's reason.
Status check_regex(const std::string& regex, bool caseless);

// One compiled expression, as exposed for diagnostics and benchmarks.
struct Expression {
    std::string signature_id;
    std::string expression;
    bool caseless = false;
};

class Scanner;

// Where Matcher::compile and YaraScanner::compile keep what they compiled
// between runs (signatures/database_cache.h says when a file is trusted).
struct CompileCache {
    std::filesystem::path directory;  // empty: compile every time, write nothing
};

// Hyperscan databases for a set of signatures. Immutable once compiled, and
// cheap to share: Scanners keep what they need alive.
class Matcher {
  public:
    // Fails with the signature id, the pattern and Hyperscan's reason when a
    // pattern does not compile.
    // With a cache directory, databases compiled earlier for the very same
    // expressions are loaded instead (milliseconds instead of about a second),
    // and new ones stored; a cache that cannot be used only costs the compile.
    static Result<Matcher> compile(std::vector<Signature> signatures,
                                   const CompileCache& cache = {});

    const std::vector<Signature>& signatures() const;
    const Signature* find(std::string_view id) const;
    std::vector<Expression> expressions(Field field) const;
    size_t database_bytes() const;  // all databases together
    size_t scratch_bytes() const;   // one Scanner's scratch
    // What compile() did with its cache, in words: "loaded from FILE",
    // "compiled, stored in FILE", "compiled (FILE: why it was not used)",
    // "compiled, not stored: why"; "" without a cache.
    const std::string& cache_note() const;

    // A Scanner owns Hyperscan scratch space: make one per thread.
    Result<Scanner> scanner() const;

    struct Impl;

  private:
    explicit Matcher(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
    std::shared_ptr<const Impl> impl_;
};

// Matches text against a Matcher's databases. Not thread-safe: one per thread.
class Scanner {
  public:
    ~Scanner();
    Scanner(Scanner&& other) noexcept;
    Scanner& operator=(Scanner&& other) noexcept;
    Scanner(const Scanner&) = delete;
    Scanner& operator=(const Scanner&) = delete;

    // Ids of the signatures with a pattern in `field` matching `text`, sorted,
    // each once. Views stay valid while any Scanner or the Matcher lives.
    std::vector<std::string_view> match(Field field, std::string_view text);
    // Same, into `ids` (cleared first), for callers that reuse the vector.
    void match_into(Field field, std::string_view text, std::vector<std::string_view>& ids);
    // Process name and executable path together (both scanned, ids merged).
    std::vector<std::string_view> match_process(std::string_view comm, std::string_view exe);
    std::vector<std::string_view> match_port(uint16_t port) const;

  private:
    friend class Matcher;
    Scanner(std::shared_ptr<const Matcher::Impl> impl, void* scratch);

    std::shared_ptr<const Matcher::Impl> impl_;
    void* scratch_ = nullptr;  // hs_scratch_t*
    std::vector<uint32_t> hits_;
};

struct YaraOptions {
    uint64_t max_file_size = 64ull << 20;  // larger files are not scanned
    std::chrono::seconds timeout{10};      // YARA's per-scan limit
};

struct YaraReport {
    std::string path;    // what was opened
    std::string sha256;  // lowercase hex of the scanned bytes
    std::string md5;     // the same bytes' MD5 (to compare with a package's md5sums)
    uint64_t size = 0;
    std::vector<std::string> rules;          // YARA rules that hit, sorted
    std::vector<std::string> signature_ids;  // pack signatures naming those rules
    bool from_cache = false;
};

// The pack's YARA rules, compiled once. Scans are thread-safe; results are
// cached by (device, inode, size, mtime) and by sha256.
class YaraScanner {
  public:
    // Fails with YARA's file:line: message when a rule does not compile.
    // With a cache directory, rules compiled earlier from the very same
    // sources by the same libyara are loaded instead (yr_rules_load), and
    // new ones stored, trusted as Matcher::compile trusts its files.
    static Result<YaraScanner> compile(const Pack& pack, YaraOptions options = {},
                                       const CompileCache& cache = {});

    // Scans the executable of `pid` through `<proc_root>/PID/exe`, which works
    // for deleted and memfd executables too. Fails when it cannot be opened
    // (kPermission / kNotFound) or is larger than max_file_size (kUnsupported).
    Result<YaraReport> scan_pid(pid_t pid, const std::filesystem::path& proc_root = "/proc");
    // Scans a file (cached like scan_pid).
    Result<YaraReport> scan_file(const std::filesystem::path& path);
    // Scans bytes in memory (never cached); the report has no path.
    Result<YaraReport> scan_bytes(std::string_view bytes);

    std::vector<std::string> rule_names() const;
    size_t cache_entries() const;
    // What compile() did with its cache, in Matcher::cache_note's words.
    const std::string& cache_note() const;

    struct Impl;

  private:
    explicit YaraScanner(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
    std::shared_ptr<Impl> impl_;
};

// Lowercase hex sha256 of `bytes`: the one in common, named here too.
using gpuguard::sha256_hex;

}  // namespace gpuguard::signatures
