// Hyperscan matching: every textual pattern of every signature is compiled
// into one block-mode database per Field; a hit reports the pattern's index,
// which maps to its signature.
#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <thread>
#include <utility>

#include <hs/hs.h>

#include "gpuguard/signatures/signatures.h"
#include "signatures/database_cache.h"

namespace gpuguard::signatures {
namespace {

constexpr size_t kFieldCount = std::size(kAllFields);

size_t field_index(Field field) { return static_cast<size_t>(field); }

// Escapes every byte that is not a letter, digit or '_' as \xHH: valid in
// Hyperscan, PCRE2 and ECMAScript alike.
std::string escape_literal(std::string_view text) {
    std::string out;
    for (const unsigned char c : text) {
        if (std::isalnum(c) || c == '_') {
            out += static_cast<char>(c);
        } else {
            char buffer[5];
            std::snprintf(buffer, sizeof buffer, "\\x%02x", c);
            out += buffer;
        }
    }
    return out;
}

// "xmrig*" -> "(?:^|/)xmrig[^/]*$": matches a bare process name or the last
// component of an executable path.
std::string glob_expression(std::string_view glob) {
    std::string body;
    for (size_t i = 0; i < glob.size(); ++i) {
        const char c = glob[i];
        if (c == '*') {
            body += "[^/]*";
        } else if (c == '?') {
            body += "[^/]";
        } else if (c == '[') {
            const size_t close = glob.find(']', i + 1);
            if (close == std::string_view::npos) {
                body += escape_literal("[");
                continue;
            }
            std::string set(glob.substr(i + 1, close - i - 1));
            if (!set.empty() && set[0] == '!') set[0] = '^';
            body += "[" + set + "]";
            i = close;
        } else {
            body += escape_literal(std::string_view(&c, 1));
        }
    }
    return "(?:^|/)" + body + "$";
}

std::string anchored(std::string expression, Anchor anchor) {
    switch (anchor) {
        case Anchor::kNone:
            return expression;
        case Anchor::kStart:
            return "^(?:" + expression + ")";
        case Anchor::kEnd:
            return "(?:" + expression + ")$";
        case Anchor::kBoth:
            return "^(?:" + expression + ")$";
    }
    return expression;
}

struct Database {
    hs_database_t* db = nullptr;
    std::vector<uint32_t> signature_of;  // pattern index -> signature index
};

}  // namespace

struct Matcher::Impl {
    std::vector<Signature> signatures;
    std::array<Database, kFieldCount> databases;
    std::array<std::vector<Expression>, kFieldCount> expressions;
    std::map<uint16_t, std::vector<uint32_t>> ports;
    hs_scratch_t* prototype = nullptr;  // cloned per Scanner
    std::string cache_note;

    ~Impl() {
        for (auto& database : databases) hs_free_database(database.db);
        hs_free_scratch(prototype);
    }
};

namespace {

// The escaped suffix, without leading dots.
std::string domain_body(const Pattern& pattern) {
    std::string_view suffix = pattern.text;
    while (!suffix.empty() && suffix.front() == '.') suffix.remove_prefix(1);
    return escape_literal(suffix);
}

// A pool host inside a command line or config file, of any of the escaped
// suffixes in `alternatives`: "-o pool.example:3333", "--url=eu.pool.example",
// "stratum+tcp://eu.pool.example:3333", "w@pool.example:4444", "url":
// "pool.example:3333". Not in a web address: "https://pool.example/api/..."
// is a dashboard reading the pool's statistics. Hyperscan has no lookbehind,
// so the scheme before "://" is told by its last two letters: http, https
// and ftp end in "tp" or "ps"; tcp, udp, ssl, tls, wss, stratum do not.
std::string host_expression(const std::string& alternatives) {
    return "(?:^|[^a-z0-9\\x2d.:/]|(?:[^t]p|[^p]s|[^ps])://)(?:[a-z0-9\\x2d]+\\x2e)*(?:" +
           alternatives + ")(?:[^a-z0-9.\\x2d]|$)";
}

}  // namespace

std::string pattern_expression(const Pattern& pattern, bool for_cmdline) {
    switch (pattern.kind) {
        case PatternKind::kRegex:
            return anchored(pattern.text, pattern.anchor);
        case PatternKind::kLiteral:
            return anchored(escape_literal(pattern.text), pattern.anchor);
        case PatternKind::kGlob:
            return glob_expression(pattern.text);
        case PatternKind::kDomainSuffix: {
            const std::string escaped = domain_body(pattern);
            if (for_cmdline) return host_expression(escaped);
            return "(?:^|\\x2e)" + escaped + "\\x2e?$";
        }
    }
    return pattern.text;
}

Status check_regex(const std::string& regex, bool caseless) {
    hs_database_t* db = nullptr;
    hs_compile_error_t* error = nullptr;
    const unsigned flags = HS_FLAG_SINGLEMATCH | (caseless ? HS_FLAG_CASELESS : 0);
    if (hs_compile(regex.c_str(), flags, HS_MODE_BLOCK, nullptr, &db, &error) != HS_SUCCESS) {
        std::string reason = error && error->message ? error->message : "unknown error";
        hs_free_compile_error(error);
        return fail(ErrorCode::kInvalidArgument, reason);
    }
    hs_free_database(db);
    return {};
}

namespace {

// One field's expressions, as hs_compile_multi takes them.
struct Pending {
    std::vector<std::string> expressions;
    std::vector<unsigned> flags;
    std::vector<unsigned> ids;
    std::vector<std::string> origin;  // "id: pattern" for errors
};
using PendingFields = std::array<Pending, kFieldCount>;

// What the databases are compiled from, as one digest: Hyperscan's version
// (its serialised form is its own) and every expression with its flags and
// id, field by field.
std::string cache_key(const PendingFields& pending) {
    std::string described = std::string("hyperscan ") + hs_version() + "\n";
    for (size_t field = 0; field < pending.size(); ++field) {
        const auto& in = pending[field];
        described +=
            "field " + std::to_string(field) + " " + std::to_string(in.expressions.size()) + "\n";
        for (size_t i = 0; i < in.expressions.size(); ++i) {
            described += std::to_string(in.flags[i]) + " " + std::to_string(in.ids[i]) + " " +
                         std::to_string(in.expressions[i].size()) + " " + in.expressions[i] + "\n";
        }
    }
    return sha256_hex(described);
}

// The databases of the cache file of `key`, one per field (null where
// `present` says the field has no expressions), or why they cannot be used:
// kNotFound when there is no file.
Result<std::array<hs_database_t*, kFieldCount>> load_databases(
    const std::filesystem::path& file, const std::string& key,
    const std::array<bool, kFieldCount>& present) {
    auto serialised = database_cache::load(file, database_cache::kHyperscan, key);
    if (!serialised) return Unexpected{serialised.error()};
    if (serialised->size() != kFieldCount) {
        return fail(ErrorCode::kInvalidArgument, file.string() + ": wrong number of databases");
    }
    for (size_t field = 0; field < kFieldCount; ++field) {
        if ((*serialised)[field].empty() == present[field]) {
            return fail(ErrorCode::kInvalidArgument,
                        file.string() + ": its databases are not these fields'");
        }
    }
    std::array<hs_database_t*, kFieldCount> out{};
    for (size_t field = 0; field < kFieldCount; ++field) {
        const std::string& bytes = (*serialised)[field];
        if (bytes.empty()) continue;
        if (hs_deserialize_database(bytes.data(), bytes.size(), &out[field]) != HS_SUCCESS) {
            for (auto* db : out) hs_free_database(db);
            return fail(ErrorCode::kInvalidArgument,
                        file.string() + ": Hyperscan refused database " + std::to_string(field));
        }
    }
    return out;
}

// The databases as the cache stores them ("" for a field without one).
Result<std::vector<std::string>> serialise(const std::array<Database, kFieldCount>& databases) {
    std::vector<std::string> out;
    for (const auto& database : databases) {
        std::string& bytes = out.emplace_back();
        if (!database.db) continue;
        char* serialised = nullptr;
        size_t size = 0;
        if (hs_serialize_database(database.db, &serialised, &size) != HS_SUCCESS) {
            return fail(ErrorCode::kInternal, "Hyperscan could not serialise a database");
        }
        bytes.assign(serialised, size);
        std::free(serialised);  // allocated with Hyperscan's misc allocator: malloc
    }
    return out;
}

// Compiles every field that has expressions into `databases`, in parallel
// (the databases are independent and Hyperscan's compiler is thread-safe:
// roughly half the start-up on two cores). Fails naming the first rejected
// pattern.
Status compile_databases(const PendingFields& pending,
                         std::array<Database, kFieldCount>& databases) {
    std::array<std::string, kFieldCount> failures;
    auto compile_field = [&](size_t field) {
        auto& in = pending[field];
        std::vector<const char*> expressions;
        for (const auto& expression : in.expressions) expressions.push_back(expression.c_str());
        hs_compile_error_t* error = nullptr;
        const hs_error_t rc =
            hs_compile_multi(expressions.data(), in.flags.data(), in.ids.data(),
                             static_cast<unsigned>(expressions.size()), HS_MODE_BLOCK, nullptr,
                             &databases[field].db, &error);
        if (rc == HS_SUCCESS) return;
        std::string& message = failures[field];
        message = "Hyperscan rejected ";
        if (error && error->expression >= 0 &&
            static_cast<size_t>(error->expression) < in.origin.size()) {
            message += in.origin[error->expression] + ": ";
        } else {
            message += std::string("the ") + to_string(kAllFields[field]) + " database: ";
        }
        message += error && error->message ? error->message : "unknown error";
        hs_free_compile_error(error);
    };
    std::vector<std::thread> workers;
    for (size_t field = 0; field < kFieldCount; ++field) {
        if (!pending[field].expressions.empty()) workers.emplace_back(compile_field, field);
    }
    for (auto& worker : workers) worker.join();
    for (const auto& failure : failures) {
        if (!failure.empty()) return fail(ErrorCode::kInvalidArgument, failure);
    }
    return {};
}

}  // namespace

Result<Matcher> Matcher::compile(std::vector<Signature> signatures, const CompileCache& cache) {
    auto impl = std::make_shared<Impl>();
    impl->signatures = std::move(signatures);

    PendingFields pending;
    auto add = [&](Field field, uint32_t signature, const Pattern& pattern, bool for_cmdline) {
        auto& out = pending[field_index(field)];
        unsigned flags = HS_FLAG_SINGLEMATCH;
        // DNS names are case-insensitive whatever the pattern says.
        const bool caseless = pattern.caseless || pattern.kind == PatternKind::kDomainSuffix;
        if (caseless) flags |= HS_FLAG_CASELESS;
        if (field == Field::kConfig) flags |= HS_FLAG_MULTILINE;
        const std::string expression = pattern_expression(pattern, for_cmdline);
        out.ids.push_back(static_cast<unsigned>(out.expressions.size()));
        out.expressions.push_back(expression);
        out.flags.push_back(flags);
        out.origin.push_back(impl->signatures[signature].id + ": " + to_string(pattern.field) +
                             " pattern '" + pattern.text + "'");
        impl->databases[field_index(field)].signature_of.push_back(signature);
        impl->expressions[field_index(field)].push_back(
            {impl->signatures[signature].id, expression, caseless});
    };
    for (uint32_t index = 0; index < impl->signatures.size(); ++index) {
        const Signature& signature = impl->signatures[index];
        // A signature's domain suffixes become one alternation per database:
        // a hundred small host patterns compile several times slower than
        // twenty alternations and match the same.
        std::vector<std::string> domains;
        for (const auto& pattern : signature.patterns) {
            if (pattern.kind == PatternKind::kDomainSuffix) {
                domains.push_back(pattern.text);
            } else {
                add(pattern.field, index, pattern, false);
            }
        }
        if (!domains.empty()) {
            Pattern combined{Field::kDomain, PatternKind::kRegex, "", true, Anchor::kNone};
            std::string alternatives;
            for (const auto& domain : domains) {
                Pattern single{Field::kDomain, PatternKind::kDomainSuffix, domain, true};
                // Appended in two steps: `"|" + std::string&&` inlines a
                // string insert that GCC 12 at -O3 reports as an overlapping
                // memcpy (-Wrestrict, a false positive of GCC 12's libstdc++).
                if (!alternatives.empty()) alternatives += '|';
                alternatives += domain_body(single);
            }
            combined.text = "(?:^|\\x2e)(?:" + alternatives + ")\\x2e?$";
            add(Field::kDomain, index, combined, false);
            // Pool domains are also looked for as hosts in command lines and
            // in configuration files ("url": "pool.example:3333").
            combined.text = host_expression(alternatives);
            add(Field::kCmdline, index, combined, false);
            add(Field::kConfig, index, combined, false);
        }
        for (const uint16_t port : signature.ports) impl->ports[port].push_back(index);
    }

    std::string key;
    std::filesystem::path cache_file;
    std::string unused_because;
    bool loaded = false;
    if (!cache.directory.empty()) {
        key = cache_key(pending);
        cache_file = database_cache::file_of(cache.directory, database_cache::kHyperscan, key);
        std::array<bool, kFieldCount> present{};
        for (size_t field = 0; field < kFieldCount; ++field) {
            present[field] = !pending[field].expressions.empty();
        }
        if (auto databases = load_databases(cache_file, key, present)) {
            for (size_t field = 0; field < kFieldCount; ++field) {
                impl->databases[field].db = (*databases)[field];
            }
            impl->cache_note = "loaded from " + cache_file.string();
            loaded = true;
        } else if (databases.error().code != ErrorCode::kNotFound) {
            unused_because = databases.error().message;
        }
    }
    if (!loaded) {
        if (auto compiled = compile_databases(pending, impl->databases); !compiled) {
            return Unexpected{compiled.error()};
        }
    }
    for (const auto& database : impl->databases) {
        if (database.db && hs_alloc_scratch(database.db, &impl->prototype) != HS_SUCCESS) {
            return fail(ErrorCode::kInternal, "hs_alloc_scratch failed");
        }
    }
    if (!loaded && !cache_file.empty()) {
        auto serialised = serialise(impl->databases);
        const auto stored =
            serialised
                ? database_cache::store(cache_file, database_cache::kHyperscan, key, *serialised)
                : Status(Unexpected{serialised.error()});
        impl->cache_note = database_cache::compiled_note(cache_file, unused_because, stored);
    }
    return Matcher(std::move(impl));
}

const std::string& Matcher::cache_note() const { return impl_->cache_note; }

const std::vector<Signature>& Matcher::signatures() const { return impl_->signatures; }

const Signature* Matcher::find(std::string_view id) const {
    for (const auto& signature : impl_->signatures) {
        if (signature.id == id) return &signature;
    }
    return nullptr;
}

std::vector<Expression> Matcher::expressions(Field field) const {
    return impl_->expressions[field_index(field)];
}

size_t Matcher::database_bytes() const {
    size_t total = 0;
    for (const auto& database : impl_->databases) {
        size_t size = 0;
        if (database.db && hs_database_size(database.db, &size) == HS_SUCCESS) total += size;
    }
    return total;
}

size_t Matcher::scratch_bytes() const {
    size_t size = 0;
    if (impl_->prototype) (void)hs_scratch_size(impl_->prototype, &size);
    return size;
}

Result<Scanner> Matcher::scanner() const {
    hs_scratch_t* scratch = nullptr;
    if (impl_->prototype && hs_clone_scratch(impl_->prototype, &scratch) != HS_SUCCESS) {
        return fail(ErrorCode::kInternal, "cannot allocate Hyperscan scratch space");
    }
    return Scanner(impl_, scratch);
}

Scanner::Scanner(std::shared_ptr<const Matcher::Impl> impl, void* scratch)
    : impl_(std::move(impl)), scratch_(scratch) {}

Scanner::~Scanner() { hs_free_scratch(static_cast<hs_scratch_t*>(scratch_)); }

Scanner::Scanner(Scanner&& other) noexcept
    : impl_(std::move(other.impl_)), scratch_(std::exchange(other.scratch_, nullptr)) {}

Scanner& Scanner::operator=(Scanner&& other) noexcept {
    if (this != &other) {
        hs_free_scratch(static_cast<hs_scratch_t*>(scratch_));
        impl_ = std::move(other.impl_);
        scratch_ = std::exchange(other.scratch_, nullptr);
    }
    return *this;
}

void Scanner::match_into(Field field, std::string_view text, std::vector<std::string_view>& ids) {
    ids.clear();
    hits_.clear();
    const Database& database = impl_->databases[field_index(field)];
    if (!database.db) return;
    auto on_match = [](unsigned int id, unsigned long long, unsigned long long, unsigned int,
                       void* context) -> int {
        static_cast<std::vector<uint32_t>*>(context)->push_back(id);
        return 0;
    };
    hs_scan(database.db, text.data(), static_cast<unsigned>(text.size()), 0,
            static_cast<hs_scratch_t*>(scratch_), on_match, &hits_);
    for (uint32_t& hit : hits_) hit = database.signature_of[hit];
    std::sort(hits_.begin(), hits_.end());
    hits_.erase(std::unique(hits_.begin(), hits_.end()), hits_.end());
    for (const uint32_t signature : hits_) ids.push_back(impl_->signatures[signature].id);
    std::sort(ids.begin(), ids.end());
}

std::vector<std::string_view> Scanner::match(Field field, std::string_view text) {
    std::vector<std::string_view> ids;
    match_into(field, text, ids);
    return ids;
}

std::vector<std::string_view> Scanner::match_process(std::string_view comm, std::string_view exe) {
    auto ids = match(Field::kProcess, comm);
    if (!exe.empty()) {
        const auto more = match(Field::kProcess, exe);
        ids.insert(ids.end(), more.begin(), more.end());
        std::sort(ids.begin(), ids.end());
        ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    }
    return ids;
}

std::vector<std::string_view> Scanner::match_port(uint16_t port) const {
    std::vector<std::string_view> ids;
    if (const auto it = impl_->ports.find(port); it != impl_->ports.end()) {
        for (const uint32_t signature : it->second) ids.push_back(impl_->signatures[signature].id);
    }
    std::sort(ids.begin(), ids.end());
    return ids;
}

}  // namespace gpuguard::signatures
