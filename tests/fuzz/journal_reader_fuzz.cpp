// libFuzzer target for the journal reader (docs/journal.md): any bytes as a
// segment file must read without a crash, a hang or an over-read, whatever
// damage they carry. Built with clang++ -fsanitize=fuzzer,address,undefined
// (tests/fuzz/CMakeLists.txt); the seeds in corpus/journal are real segments.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <sys/mman.h>
#include <unistd.h>

#include "gpuguard/events/event_json.h"
#include "gpuguard/journal/journal.h"

namespace journal = gpuguard::agent::journal;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);

    // The payload decoders on their own.
    gpuguard::agent::Event event;
    std::string error;
    if (journal::decode_event(bytes, event, error)) {
        (void)gpuguard::agent::event_to_json(event, 0);
    }
    size_t header_size = 0;
    (void)journal::decode_header(bytes, header_size, error);

    // The whole reader, through a file (it reads paths).
    const int fd = memfd_create("journal-fuzz", MFD_CLOEXEC);
    if (fd < 0) return 0;
    size_t written = 0;
    while (written < size) {
        const ssize_t n = write(fd, data + written, size - written);
        if (n <= 0) break;
        written += static_cast<size_t>(n);
    }
    journal::ReaderOptions options;
    options.meta = true;
    options.snapshots = journal::SnapshotMode::kAll;
    auto reader = journal::JournalReader::open({"/proc/self/fd/" + std::to_string(fd)}, options);
    if (reader) {
        journal::JournalRecord record;
        while (reader->next(record)) {
            if (record.kind == journal::RecordKind::kEvent) {
                (void)gpuguard::agent::event_to_json(record.event, record.realtime_offset_ns);
            }
        }
        (void)reader->clean();
    }
    close(fd);
    return 0;
}
