// Events of every type and small helpers shared by the journal tests.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gpuguard/events/event.h"
#include "gpuguard/journal/journal.h"

namespace gpuguard::testing {

// One event of every Event type (and variants: failed open, signal exit,
// IPv6, empty optionals), with ts_ns from `ts_ns` upwards and pid `pid`.
std::vector<agent::Event> every_event_type(uint64_t ts_ns = 1'000'000'000, uint32_t pid = 4242);

// A simple event stream: n gpu_ioctl/connect/exec events, ts_ns = base + i * step.
agent::Event numbered_event(uint64_t index, uint64_t base_ns = 1'000'000'000,
                            uint64_t step_ns = 1'000'000);

// Options for a test journal in `dir`: no fsync wait, fake clocks left unset.
agent::journal::JournalOptions test_options(const std::filesystem::path& dir);

agent::journal::JournalIdentity test_identity();

// Every record of a journal read with `options`.
std::vector<agent::journal::JournalRecord> read_all(const std::filesystem::path& path,
                                                    agent::journal::ReaderOptions options = {});

// JSON of each event record (realtime offset 0), for comparisons.
std::vector<std::string> event_jsons(const std::vector<agent::journal::JournalRecord>& records);

// The journal's segment files in `dir`, oldest first.
std::vector<std::filesystem::path> segment_paths(const std::filesystem::path& dir);

// A writer over `options` (test identity, nvidia devices), null after a
// failed expectation.
std::unique_ptr<agent::journal::JournalWriter> open_writer(agent::journal::JournalOptions options,
                                                           std::vector<agent::Event> snapshot = {});

std::string read_bytes(const std::filesystem::path& path);
void write_bytes(const std::filesystem::path& path, const std::string& bytes);

}  // namespace gpuguard::testing
