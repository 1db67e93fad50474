// Local outputs: stdout and a size-rotated file, one record per line. A
// batch counts as delivered once written (and, for the file, fdatasync'ed).
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include "siem/transport.h"

namespace gpuguard::siem {
namespace {

bool write_all(int fd, const std::string& buffer) {
    size_t done = 0;
    while (done < buffer.size()) {
        const ssize_t n = write(fd, buffer.data() + done, buffer.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        done += static_cast<size_t>(n);
    }
    return true;
}

std::string lines(const std::vector<QueuedRecord>& batch, size_t* payload) {
    std::string buffer;
    for (const auto& record : batch) {
        buffer += record.data;
        buffer.push_back('\n');
        *payload += record.data.size();
    }
    return buffer;
}

class StdoutTransport final : public Transport {
  public:
    Delivery deliver(const std::vector<QueuedRecord>& batch) override {
        Delivery delivery;
        const std::string buffer = lines(batch, &delivery.bytes);
        if (!write_all(STDOUT_FILENO, buffer)) {
            delivery.bytes = 0;
            delivery.error = fmt::format("write stdout: {}", strerror(errno));
            return delivery;
        }
        delivery.delivered = batch.size();
        return delivery;
    }
};

class FileTransport final : public Transport {
  public:
    FileTransport(std::filesystem::path path, uint64_t max_bytes, uint32_t max_files)
        : path_(std::move(path)), max_bytes_(max_bytes), max_files_(max_files) {}
    ~FileTransport() override {
        if (fd_ >= 0) close(fd_);
    }

    Delivery deliver(const std::vector<QueuedRecord>& batch) override {
        Delivery delivery;
        if (fd_ >= 0 && max_bytes_ > 0 && size_ >= max_bytes_) rotate();
        if (fd_ < 0 && !open_file(&delivery.error)) return delivery;
        size_t payload = 0;
        const std::string buffer = lines(batch, &payload);
        if (!write_all(fd_, buffer) || fdatasync(fd_) != 0) {
            delivery.error = fmt::format("write {}: {}", path_.string(), strerror(errno));
            close(fd_);
            fd_ = -1;
            return delivery;
        }
        size_ += buffer.size();
        delivery.delivered = batch.size();
        delivery.bytes = payload;
        return delivery;
    }

  private:
    bool open_file(std::string* error) {
        fd_ = open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
        if (fd_ < 0) {
            *error = fmt::format("open {}: {}", path_.string(), strerror(errno));
            return false;
        }
        struct stat st {};
        size_ = fstat(fd_, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
        return true;
    }

    // path -> path.1 -> ... -> path.N (the oldest is removed), like logrotate.
    void rotate() {
        close(fd_);
        fd_ = -1;
        std::error_code ec;
        const auto numbered = [&](uint32_t n) {
            return std::filesystem::path(path_.string() + "." + std::to_string(n));
        };
        if (max_files_ == 0) {
            std::filesystem::remove(path_, ec);
            return;
        }
        std::filesystem::remove(numbered(max_files_), ec);
        for (uint32_t n = max_files_; n > 1; --n) {
            if (std::filesystem::exists(numbered(n - 1), ec)) {
                std::filesystem::rename(numbered(n - 1), numbered(n), ec);
            }
        }
        std::filesystem::rename(path_, numbered(1), ec);
    }

    std::filesystem::path path_;
    uint64_t max_bytes_;
    uint32_t max_files_;
    int fd_ = -1;
    uint64_t size_ = 0;
};

}  // namespace

Result<std::unique_ptr<Transport>> make_local_transport(const SinkConfig& sink) {
    if (sink.type == SinkType::kStdout) {
        return std::unique_ptr<Transport>(std::make_unique<StdoutTransport>());
    }
    return std::unique_ptr<Transport>(
        std::make_unique<FileTransport>(sink.address, sink.file_max_bytes, sink.file_max_files));
}

Result<std::unique_ptr<Transport>> make_transport(const SinkConfig& sink) {
    switch (sink.type) {
        case SinkType::kStdout:
        case SinkType::kFile:
            return make_local_transport(sink);
        case SinkType::kLocalSyslog:
        case SinkType::kUdp:
            return make_datagram_transport(sink);
        case SinkType::kTcp:
        case SinkType::kTls:
            return make_stream_transport(sink);
        case SinkType::kWebhook:
        case SinkType::kSplunkHec:
        case SinkType::kElasticsearch:
            return make_http_transport(sink);
    }
    return fail(ErrorCode::kInvalidArgument, "unknown sink type");
}

}  // namespace gpuguard::siem
