// Disk layout: <dir>/<first seq, 16 hex digits>.seg files of records
//   u32 magic "GGQ1" | u32 length | u64 seq | u32 crc32(seq, payload) | payload
// (little endian) and <dir>/ack, the highest delivered sequence number,
// replaced by rename after each delivered batch. A crash between delivery
// and the ack update resends that batch: at-least-once, never at-most-once.
#include "siem/record_queue.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <fstream>

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>
#include <zlib.h>

#include "gpuguard/common/dir_entries.h"

namespace gpuguard::siem {
namespace {

constexpr uint32_t kMagic = 0x31515147;  // "GGQ1"
constexpr size_t kHeaderSize = 20;
constexpr uint32_t kMaxRecord = 64u << 20;
constexpr size_t kWriteBuffer = 256u << 10;
constexpr auto kAckInterval = std::chrono::milliseconds(200);

uint32_t record_crc(uint64_t seq, const char* data, size_t size) {
    unsigned char seq_bytes[8];
    std::memcpy(seq_bytes, &seq, 8);
    uLong crc = crc32(0L, Z_NULL, 0);
    crc = crc32(crc, seq_bytes, 8);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data), static_cast<uInt>(size));
    return static_cast<uint32_t>(crc);
}

struct Header {
    uint32_t magic = 0;
    uint32_t length = 0;
    uint64_t seq = 0;
    uint32_t crc = 0;
};

Header decode_header(const char* p) {
    Header h;
    std::memcpy(&h.magic, p, 4);
    std::memcpy(&h.length, p + 4, 4);
    std::memcpy(&h.seq, p + 8, 8);
    std::memcpy(&h.crc, p + 16, 4);
    return h;
}

bool pread_all(int fd, char* buffer, size_t size, uint64_t offset) {
    size_t done = 0;
    while (done < size) {
        const ssize_t n = pread(fd, buffer + done, size - done, static_cast<off_t>(offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        done += static_cast<size_t>(n);
    }
    return true;
}

class MemoryQueue final : public RecordQueue {
  public:
    Status append(std::string_view data) override {
        records_.push_back({next_seq_++, std::string(data)});
        bytes_ += data.size();
        return {};
    }
    int sync_fd() override { return -1; }
    Status peek(size_t max_records, size_t max_bytes, std::vector<QueuedRecord>* out) override {
        size_t bytes = 0;
        for (const auto& record : records_) {
            if (out->size() >= max_records || (!out->empty() && bytes >= max_bytes)) break;
            out->push_back(record);
            bytes += record.data.size();
        }
        return {};
    }
    Status ack_through(uint64_t seq) override {
        while (!records_.empty() && records_.front().seq <= seq) {
            bytes_ -= records_.front().data.size();
            records_.pop_front();
        }
        return {};
    }
    uint64_t drop_oldest() override {
        if (records_.empty()) return 0;
        bytes_ -= records_.front().data.size();
        records_.pop_front();
        return 1;
    }
    uint64_t records() const override { return records_.size(); }
    uint64_t bytes() const override { return bytes_; }
    uint64_t corrupt() const override { return 0; }

  private:
    std::deque<QueuedRecord> records_;
    uint64_t bytes_ = 0;
    uint64_t next_seq_ = 1;
};

class DiskQueue final : public RecordQueue {
  public:
    DiskQueue(std::filesystem::path dir, uint64_t segment_bytes)
        : dir_(std::move(dir)), segment_bytes_(segment_bytes) {}

    ~DiskQueue() override {
        (void)flush_writes();
        if (acked_seq_ != written_ack_) (void)write_ack();
        if (tail_fd_ >= 0) {
            fdatasync(tail_fd_);
            close(tail_fd_);
        }
        close_read_fd();
    }

    Status recover();

    Status append(std::string_view data) override {
        if (data.size() > kMaxRecord) {
            return fail(ErrorCode::kInvalidArgument, "queue: record larger than 64 MiB");
        }
        if (segments_.empty() || segments_.back().size >= segment_bytes_) {
            if (Status opened = open_new_segment(); !opened) return opened;
        }
        Segment& tail = segments_.back();
        const uint64_t seq = next_seq_;
        std::string buffer(kHeaderSize, '\0');
        const uint32_t length = static_cast<uint32_t>(data.size());
        const uint32_t crc = record_crc(seq, data.data(), data.size());
        std::memcpy(buffer.data(), &kMagic, 4);
        std::memcpy(buffer.data() + 4, &length, 4);
        std::memcpy(buffer.data() + 8, &seq, 8);
        std::memcpy(buffer.data() + 16, &crc, 4);
        buffer.append(data);
        // Appends are buffered and written in one go by flush_writes() (before
        // a sync or a read), so a burst costs one write(), not one per record.
        pending_ += buffer;
        if (pending_.size() >= kWriteBuffer) {
            if (Status flushed = flush_writes(); !flushed) return flushed;
        }
        tail.size += buffer.size();
        tail.count += 1;
        tail.last_seq = seq;
        ++next_seq_;
        ++records_;
        bytes_ += buffer.size();
        return {};
    }

    int sync_fd() override {
        if (Status flushed = flush_writes(); !flushed) return -1;
        return tail_fd_;
    }

    // Writes what append() buffered. On failure the buffered records are
    // lost (counted as corrupt) and the segment is cut back to its last
    // complete record.
    Status flush_writes() {
        if (pending_.empty()) return {};
        size_t done = 0;
        while (done < pending_.size()) {
            const ssize_t n = write(tail_fd_, pending_.data() + done, pending_.size() - done);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                const int err = errno;
                Segment& tail = segments_.back();
                const uint64_t written_end = tail.size - pending_.size();
                pending_.clear();
                if (ftruncate(tail_fd_, static_cast<off_t>(written_end)) != 0) {
                    tail.size = segment_bytes_;
                }
                truncate_corrupt(tail, written_end);
                return fail(ErrorCode::kIo,
                            fmt::format("queue: write {}: {}", tail.path.string(), strerror(err)),
                            err);
            }
            done += static_cast<size_t>(n);
        }
        pending_.clear();
        return {};
    }

    Status peek(size_t max_records, size_t max_bytes, std::vector<QueuedRecord>* out) override {
        if (Status flushed = flush_writes(); !flushed) return flushed;
        size_t bytes = 0;
        for (size_t index = 0; index < segments_.size(); ++index) {
            Segment& segment = segments_[index];
            uint64_t offset = index == 0 ? head_offset_ : 0;
            if (offset >= segment.size) continue;
            if (!open_read_fd(segment)) {
                return fail(ErrorCode::kIo, fmt::format("queue: open {}: {}", segment.path.string(),
                                                        strerror(errno)));
            }
            // One read for many small records; records past the chunk are read alone.
            const size_t chunk_size = static_cast<size_t>(std::min<uint64_t>(
                segment.size - offset, std::max<uint64_t>(max_bytes, 1 << 16) + kHeaderSize));
            std::string chunk(chunk_size, '\0');
            if (!pread_all(read_fd_, chunk.data(), chunk_size, offset)) {
                return fail(ErrorCode::kIo, fmt::format("queue: read {}", segment.path.string()));
            }
            size_t pos = 0;
            while (offset + pos < segment.size) {
                if (out->size() >= max_records || (!out->empty() && bytes >= max_bytes)) {
                    return {};
                }
                Header h;
                std::string payload;
                if (pos + kHeaderSize <= chunk.size()) {
                    h = decode_header(chunk.data() + pos);
                } else {
                    char raw[kHeaderSize];
                    if (!pread_all(read_fd_, raw, kHeaderSize, offset + pos)) break;
                    h = decode_header(raw);
                }
                if (h.magic != kMagic || h.length > kMaxRecord ||
                    offset + pos + kHeaderSize + h.length > segment.size) {
                    truncate_corrupt(segment, offset + pos);
                    break;
                }
                if (pos + kHeaderSize + h.length <= chunk.size()) {
                    payload.assign(chunk.data() + pos + kHeaderSize, h.length);
                } else {
                    payload.resize(h.length);
                    if (!pread_all(read_fd_, payload.data(), h.length,
                                   offset + pos + kHeaderSize)) {
                        break;
                    }
                }
                if (record_crc(h.seq, payload.data(), payload.size()) != h.crc) {
                    truncate_corrupt(segment, offset + pos);
                    break;
                }
                bytes += payload.size();
                out->push_back({h.seq, std::move(payload)});
                pos += kHeaderSize + h.length;
            }
        }
        return {};
    }

    Status ack_through(uint64_t seq) override {
        if (Status flushed = flush_writes(); !flushed) return flushed;
        bool advanced = false;
        while (!segments_.empty()) {
            Segment& head = segments_.front();
            while (head_offset_ < head.size) {
                if (!open_read_fd(head)) break;
                char raw[kHeaderSize];
                if (!pread_all(read_fd_, raw, kHeaderSize, head_offset_)) break;
                const Header h = decode_header(raw);
                if (h.magic != kMagic || h.seq > seq) break;
                head_offset_ += kHeaderSize + h.length;
                --head.count;
                --records_;
                bytes_ -= kHeaderSize + h.length;
                advanced = true;
            }
            const bool consumed = head_offset_ >= head.size;
            if (!consumed || segments_.size() == 1) break;
            remove_head_segment();
        }
        if (advanced) {
            acked_seq_ = std::max(acked_seq_, seq);
            // The ack file is rewritten at most every kAckInterval (and when
            // the queue runs empty): a crash resends at most that much again.
            const auto now = std::chrono::steady_clock::now();
            if (records_ == 0 || now - last_ack_write_ >= kAckInterval) {
                last_ack_write_ = now;
                return write_ack();
            }
        }
        return {};
    }

    uint64_t drop_oldest() override {
        if (!flush_writes()) return 0;
        if (segments_.empty()) return 0;
        const uint64_t dropped = segments_.front().count;
        records_ -= dropped;
        bytes_ -= segments_.front().size - head_offset_;
        // Dropped records count as handled, so a restart does not bring them back;
        // dropping the tail makes the next append start a new segment.
        acked_seq_ = std::max(acked_seq_, segments_.front().last_seq);
        remove_head_segment();
        (void)write_ack();
        return dropped;
    }

    uint64_t records() const override { return records_; }
    uint64_t bytes() const override { return bytes_; }
    uint64_t corrupt() const override { return corrupt_; }

  private:
    struct Segment {
        std::filesystem::path path;
        uint64_t first_seq = 0;
        uint64_t last_seq = 0;
        uint64_t size = 0;   // valid bytes
        uint64_t count = 0;  // records not yet acknowledged
    };

    std::filesystem::path segment_path(uint64_t first_seq) const {
        return dir_ / fmt::format("{:016x}.seg", first_seq);
    }

    Status open_new_segment() {
        if (Status flushed = flush_writes(); !flushed) return flushed;
        if (tail_fd_ >= 0) {
            fdatasync(tail_fd_);
            close(tail_fd_);
            tail_fd_ = -1;
            // A tail that was fully delivered is no longer needed.
            if (segments_.size() == 1 && segments_.front().count == 0) remove_head_segment();
        }
        Segment segment;
        segment.first_seq = next_seq_;
        segment.last_seq = next_seq_ - 1;
        segment.path = segment_path(next_seq_);
        tail_fd_ = open(segment.path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (tail_fd_ < 0) {
            const int err = errno;
            return fail(ErrorCode::kIo,
                        fmt::format("queue: create {}: {}", segment.path.string(), strerror(err)),
                        err);
        }
        if (segments_.empty()) head_offset_ = 0;
        segments_.push_back(std::move(segment));
        return {};
    }

    void remove_head_segment() {
        Segment& head = segments_.front();
        if (read_fd_path_ == head.path) close_read_fd();
        if (segments_.size() == 1 && tail_fd_ >= 0) {
            close(tail_fd_);
            tail_fd_ = -1;
        }
        std::error_code ec;
        std::filesystem::remove(head.path, ec);
        segments_.pop_front();
        head_offset_ = 0;
    }

    bool open_read_fd(const Segment& segment) {
        if (read_fd_ >= 0 && read_fd_path_ == segment.path) return true;
        close_read_fd();
        read_fd_ = open(segment.path.c_str(), O_RDONLY | O_CLOEXEC);
        if (read_fd_ < 0) return false;
        read_fd_path_ = segment.path;
        return true;
    }

    void close_read_fd() {
        if (read_fd_ >= 0) close(read_fd_);
        read_fd_ = -1;
        read_fd_path_.clear();
    }

    // A bad record: everything from `offset` on in this segment is lost.
    void truncate_corrupt(Segment& segment, uint64_t offset) {
        ++corrupt_;
        const uint64_t lost_bytes = segment.size - offset;
        bytes_ -= std::min(bytes_, lost_bytes);
        segment.size = offset;
        if (&segment == &segments_.back() && tail_fd_ >= 0) {
            // Keep appending after the last good record; if the cut fails the
            // next append starts a new segment.
            if (ftruncate(tail_fd_, static_cast<off_t>(offset)) != 0) {
                segment.size = segment_bytes_;
            }
        }
        recount();
    }

    // Recomputes record counts by walking headers (after a corruption).
    void recount() {
        records_ = 0;
        for (size_t index = 0; index < segments_.size(); ++index) {
            Segment& segment = segments_[index];
            segment.count = 0;
            uint64_t offset = index == 0 ? head_offset_ : 0;
            if (!open_read_fd(segment)) continue;
            while (offset + kHeaderSize <= segment.size) {
                char raw[kHeaderSize];
                if (!pread_all(read_fd_, raw, kHeaderSize, offset)) break;
                const Header h = decode_header(raw);
                if (h.magic != kMagic) break;
                offset += kHeaderSize + h.length;
                ++segment.count;
            }
            records_ += segment.count;
        }
    }

    Status write_ack() {
        const auto tmp = dir_ / "ack.tmp";
        const std::string text = fmt::format("{}\n", acked_seq_);
        const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0) {
            return fail(ErrorCode::kIo,
                        fmt::format("queue: write {}: {}", tmp.string(), strerror(errno)));
        }
        const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
        close(fd);
        std::error_code ec;
        if (ok) std::filesystem::rename(tmp, dir_ / "ack", ec);
        if (ok && !ec) written_ack_ = acked_seq_;
        if (!ok || ec)
            return fail(ErrorCode::kIo, "queue: cannot update " + (dir_ / "ack").string());
        return {};
    }

    std::filesystem::path dir_;
    uint64_t segment_bytes_;
    std::deque<Segment> segments_;
    uint64_t head_offset_ = 0;  // in segments_.front()
    uint64_t next_seq_ = 1;
    uint64_t acked_seq_ = 0;
    uint64_t records_ = 0;
    uint64_t bytes_ = 0;
    uint64_t corrupt_ = 0;
    int tail_fd_ = -1;
    std::string pending_;  // appended, not yet written
    uint64_t written_ack_ = 0;
    std::chrono::steady_clock::time_point last_ack_write_{};
    int read_fd_ = -1;
    std::filesystem::path read_fd_path_;
};

Status DiskQueue::recover() {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (ec) {
        return fail(ErrorCode::kIo,
                    fmt::format("queue: create {}: {}", dir_.string(), ec.message()));
    }
    {
        std::ifstream ack(dir_ / "ack");
        uint64_t value = 0;
        if (ack >> value) acked_seq_ = value;
    }
    std::vector<std::filesystem::path> files;
    auto entries = list_directory(dir_);  // getdents64, as every listing of the agent's own
    if (!entries) {
        return fail(ErrorCode::kIo, fmt::format("queue: read {}: {}", dir_.string(),
                                                std::strerror(entries.error().sys_errno)));
    }
    for (const DirEntry& entry : *entries) {
        if (std::filesystem::path(entry.name).extension() == ".seg")
            files.push_back(dir_ / entry.name);
    }
    std::sort(files.begin(), files.end());
    uint64_t last_seq = acked_seq_;
    for (size_t index = 0; index < files.size(); ++index) {
        const int fd = open(files[index].c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            return fail(ErrorCode::kIo,
                        fmt::format("queue: open {}: {}", files[index].string(), strerror(errno)));
        }
        const off_t file_size = lseek(fd, 0, SEEK_END);
        Segment segment;
        segment.path = files[index];
        uint64_t offset = 0;
        uint64_t first_unacked_offset = UINT64_MAX;
        bool first = true;
        std::string payload;
        while (offset + kHeaderSize <= static_cast<uint64_t>(file_size)) {
            char raw[kHeaderSize];
            if (!pread_all(fd, raw, kHeaderSize, offset)) break;
            const Header h = decode_header(raw);
            if (h.magic != kMagic || h.length > kMaxRecord ||
                offset + kHeaderSize + h.length > static_cast<uint64_t>(file_size) ||
                (!first && h.seq <= segment.last_seq)) {
                break;
            }
            payload.resize(h.length);
            if (!pread_all(fd, payload.data(), h.length, offset + kHeaderSize)) break;
            if (record_crc(h.seq, payload.data(), payload.size()) != h.crc) break;
            if (first) segment.first_seq = h.seq;
            first = false;
            segment.last_seq = h.seq;
            if (h.seq > acked_seq_) {
                if (first_unacked_offset == UINT64_MAX) first_unacked_offset = offset;
                ++segment.count;
            }
            offset += kHeaderSize + h.length;
        }
        close(fd);
        if (offset < static_cast<uint64_t>(file_size)) {
            // A torn write at the end of the last segment is expected after a
            // crash; anywhere else the rest of the segment is corrupt.
            ++corrupt_;
            if (truncate(files[index].c_str(), static_cast<off_t>(offset)) != 0) {
                return fail(ErrorCode::kIo, fmt::format("queue: truncate {}: {}",
                                                        files[index].string(), strerror(errno)));
            }
        }
        segment.size = offset;
        if (!first) last_seq = std::max(last_seq, segment.last_seq);
        if (segment.count == 0) {
            std::filesystem::remove(files[index], ec);
            continue;
        }
        if (segments_.empty()) head_offset_ = first_unacked_offset;
        records_ += segment.count;
        bytes_ += segment.size - (segments_.empty() ? first_unacked_offset : 0);
        segments_.push_back(std::move(segment));
    }
    next_seq_ = last_seq + 1;
    if (!segments_.empty()) {
        tail_fd_ = open(segments_.back().path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
        if (tail_fd_ < 0) {
            return fail(
                ErrorCode::kIo,
                fmt::format("queue: open {}: {}", segments_.back().path.string(), strerror(errno)));
        }
    }
    return {};
}

}  // namespace

std::unique_ptr<RecordQueue> make_memory_queue() { return std::make_unique<MemoryQueue>(); }

Result<std::unique_ptr<RecordQueue>> open_disk_queue(const std::filesystem::path& dir,
                                                     uint64_t segment_bytes) {
    auto queue = std::make_unique<DiskQueue>(dir, std::max<uint64_t>(segment_bytes, 4096));
    if (Status recovered = queue->recover(); !recovered) return Unexpected{recovered.error()};
    return std::unique_ptr<RecordQueue>(std::move(queue));
}

}  // namespace gpuguard::siem
