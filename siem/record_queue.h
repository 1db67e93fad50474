// A sink's queue of formatted records waiting for delivery: in memory, or
// on disk as segment files that survive restarts. Records keep their
// sequence number from append to acknowledgement, so a batch in flight can
// be acknowledged even if older records were dropped meanwhile. Not
// thread-safe: the owning Sink serialises access.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gpuguard/common/result.h"

namespace gpuguard::siem {

struct QueuedRecord {
    uint64_t seq = 0;
    std::string data;
};

class RecordQueue {
  public:
    virtual ~RecordQueue() = default;

    // Appends one record (capacity is the caller's business). kIo on a failed write.
    virtual Status append(std::string_view data) = 0;
    // The file descriptor to fdatasync for durability of what was appended,
    // -1 when there is nothing to sync. Only the appending thread closes it.
    virtual int sync_fd() = 0;
    // Copies up to `max_records` (and about `max_bytes`) from the head, oldest first.
    virtual Status peek(size_t max_records, size_t max_bytes, std::vector<QueuedRecord>* out) = 0;
    // Removes every record with a sequence number <= `seq` (delivered).
    virtual Status ack_through(uint64_t seq) = 0;
    // Discards the oldest records (a whole segment on disk); returns how many.
    virtual uint64_t drop_oldest() = 0;

    virtual uint64_t records() const = 0;
    virtual uint64_t bytes() const = 0;
    // Records lost to corruption (bad checksum, torn write) found so far.
    virtual uint64_t corrupt() const = 0;
};

std::unique_ptr<RecordQueue> make_memory_queue();

// Opens or creates the queue in `dir` and recovers it: records not yet
// acknowledged come back in order; a torn or corrupt tail is cut off and
// counted in corrupt(). `segment_bytes` bounds one segment file. Fails with
// kIo when the directory cannot be created or read.
Result<std::unique_ptr<RecordQueue>> open_disk_queue(const std::filesystem::path& dir,
                                                     uint64_t segment_bytes);

}  // namespace gpuguard::siem
