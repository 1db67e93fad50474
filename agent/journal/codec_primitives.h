// The journal format's building blocks: little-endian integers, varints and
// length-prefixed strings (Writer, Reader) and the on-disk event tags.
// Private to the journal room, shared by journal_codec.cpp (records,
// headers, frames) and journal_event_codec.cpp (events).
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>

#include "gpuguard/events/event_declarations.h"
#include "gpuguard/journal/journal_codec.h"

namespace gpuguard::agent::journal {

static_assert(std::endian::native == std::endian::little,
              "the journal format is little-endian; add byte swaps for this host");

// Event type tags on disk, as each type's declaration gives them
// (event_declarations.h). Never renumber: add new ones at the end.
enum class EventTag : uint8_t {
    kGpuOpen = schema::Declaration<GpuOpen>::tag,
    kGpuIoctl = schema::Declaration<GpuIoctl>::tag,
    kConnect = schema::Declaration<Connect>::tag,
    kExec = schema::Declaration<Exec>::tag,
    kFork = schema::Declaration<Fork>::tag,
    kExit = schema::Declaration<Exit>::tag,
    kTelemetry = schema::Declaration<Telemetry>::tag,
    kProcessSnapshot = schema::Declaration<ProcessSnapshot>::tag,
    kKillNow = schema::Declaration<KillNow>::tag,
    kExeScan = schema::Declaration<ExeScan>::tag,
    kNetPayload = schema::Declaration<NetPayload>::tag,
    kStratum = schema::Declaration<Stratum>::tag,
    kProcessIo = schema::Declaration<ProcessIo>::tag,
    kConfigFile = schema::Declaration<ConfigFile>::tag,
    kHiddenProcess = schema::Declaration<HiddenProcess>::tag,
    kModuleLoad = schema::Declaration<ModuleLoad>::tag,
    kFileChange = schema::Declaration<FileChange>::tag,
    kProcessEnv = schema::Declaration<ProcessEnv>::tag,
    kAgentTamper = schema::Declaration<AgentTamper>::tag,  // 19-20 kept for the agent's own records
    kContainer = schema::Declaration<Container>::tag,
    kCpuUsage = schema::Declaration<CpuUsage>::tag,
    kGpuLibraries = schema::Declaration<GpuLibraries>::tag,
    kLoopbackPeer = schema::Declaration<LoopbackPeer>::tag,
    kPoolProbe = schema::Declaration<PoolProbe>::tag,
    kProcessCmdline = schema::Declaration<ProcessCmdline>::tag,
    kFlow = schema::Declaration<Flow>::tag,
    kTrustChange = schema::Declaration<TrustChange>::tag,
    kWorkload = schema::Declaration<Workload>::tag,
    kGpuFault = schema::Declaration<GpuFault>::tag,
};

// --- writing --------------------------------------------------------------

class Writer {
  public:
    explicit Writer(std::string& out) : out_(out) {}

    void u8(uint8_t value) { out_.push_back(static_cast<char>(value)); }
    void varint(uint64_t value) {
        char bytes[10];
        size_t n = 0;
        while (value >= 0x80) {
            bytes[n++] = static_cast<char>(value | 0x80);
            value >>= 7;
        }
        bytes[n++] = static_cast<char>(value);
        out_.append(bytes, n);
    }
    void svarint(int64_t value) {  // zigzag
        varint((static_cast<uint64_t>(value) << 1) ^ static_cast<uint64_t>(value >> 63));
    }
    void str(std::string_view text) {
        varint(text.size());
        out_.append(text);
    }
    void strings(const std::vector<std::string>& list) {
        varint(list.size());
        for (const auto& text : list) str(text);
    }
    void f64(double value) {
        char bytes[8];
        std::memcpy(bytes, &value, 8);
        out_.append(bytes, 8);
    }
    void opt_u64(const std::optional<uint64_t>& value) {
        u8(value ? 1 : 0);
        if (value) varint(*value);
    }
    void opt_f64(const std::optional<double>& value) {
        u8(value ? 1 : 0);
        if (value) f64(*value);
    }

  private:
    std::string& out_;
};

// --- reading --------------------------------------------------------------

// Reads fields in order; the first failure sticks and later reads return
// zero values, so a decoder checks ok() once at the end.
class Reader {
  public:
    explicit Reader(std::string_view bytes) : p_(bytes.data()), end_(bytes.data() + bytes.size()) {}

    bool ok() const { return error_ == nullptr; }
    const char* error() const { return error_; }
    size_t remaining() const { return static_cast<size_t>(end_ - p_); }
    void fail(const char* what) {
        if (!error_) error_ = what;
        p_ = end_;
    }

    uint8_t u8() {
        if (p_ >= end_) {
            fail("truncated");
            return 0;
        }
        return static_cast<uint8_t>(*p_++);
    }
    bool flag() {
        const uint8_t value = u8();
        if (value > 1) fail("bad boolean");
        return value == 1;
    }
    uint64_t varint() {
        uint64_t value = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (p_ >= end_) {
                fail("truncated varint");
                return 0;
            }
            const auto byte = static_cast<uint8_t>(*p_++);
            value |= static_cast<uint64_t>(byte & 0x7f) << shift;
            if ((byte & 0x80) == 0) return value;
        }
        fail("varint too long");
        return 0;
    }
    int64_t svarint() {
        const uint64_t raw = varint();
        return static_cast<int64_t>((raw >> 1) ^ (~(raw & 1) + 1));
    }
    template <typename T>
    T uint() {
        const uint64_t value = varint();
        if (value > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
            fail("integer out of range");
            return 0;
        }
        return static_cast<T>(value);
    }
    template <typename T>
    T sint() {
        const int64_t value = svarint();
        if (value < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
            value > static_cast<int64_t>(std::numeric_limits<T>::max())) {
            fail("integer out of range");
            return 0;
        }
        return static_cast<T>(value);
    }
    void str(std::string& out) {
        const uint64_t size = varint();
        if (size > remaining()) {
            fail("string longer than the record");
            out.clear();
            return;
        }
        out.assign(p_, size);
        p_ += size;
    }
    std::string str() {
        std::string out;
        str(out);
        return out;
    }
    // A count of elements that take at least one byte each: bounded by what is left.
    size_t count() {
        const uint64_t n = varint();
        if (n > remaining()) {
            fail("count larger than the record");
            return 0;
        }
        return static_cast<size_t>(n);
    }
    void strings(std::vector<std::string>& out) {
        const size_t n = count();
        out.resize(n);
        for (auto& text : out) str(text);
        if (!ok()) out.clear();
    }
    double f64() {
        if (remaining() < 8) {
            fail("truncated");
            return 0;
        }
        double value;
        std::memcpy(&value, p_, 8);
        p_ += 8;
        return value;
    }
    std::optional<uint64_t> opt_u64() {
        if (!flag()) return std::nullopt;
        return varint();
    }
    std::optional<double> opt_f64() {
        if (!flag()) return std::nullopt;
        return f64();
    }

  private:
    const char* p_;
    const char* end_;
    const char* error_ = nullptr;
};

inline bool finish(const Reader& reader, std::string& error) {
    if (reader.ok()) return true;  // trailing bytes: fields of a newer minor version
    error = reader.error();
    return false;
}

}  // namespace gpuguard::agent::journal
