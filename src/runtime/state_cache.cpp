// The on-disk state cache: entry files (checksummed sink and source over a file descriptor), the
// scan at start, restore of the longest usable prefix, atomic saves and eviction by recency.
#include "runtime/state_cache.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <functional>
#include <memory>

#include "core/durable_file.h"
#include "core/error.h"
#include "core/regular_file.h"
#include "runtime/conversation.h"

namespace sluice::runtime {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'S', 'L', 'U', 'I', 'C', 'E', 'S', 'T'};
constexpr uint32_t kVersion = 1;
constexpr size_t kKeyChars = 16;
constexpr uint64_t kHeadBytes = 8 + 4 + 4 + kKeyChars + 8;  // magic, version, reserved, key, token count
constexpr uint64_t kTailBytes = 16;                         // payload size, xxh3
constexpr size_t kBufferBytes = size_t(1) << 20;

using Hasher = std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)>;
Hasher new_hasher() {
  Hasher h(XXH3_createState(), &XXH3_freeState);
  SLUICE_CHECK(h && XXH3_64bits_reset(h.get()) == XXH_OK, "xxh3: cannot make a hash state");
  return h;
}

std::string hex16(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", (unsigned long long)v);
  return b;
}

void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i));
}
void put_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = uint8_t(v >> (8 * i));
}
uint32_t get_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t(p[i]) << (8 * i);
  return v;
}
uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(p[i]) << (8 * i);
  return v;
}

int64_t now_ns() {
  timespec t{};
  ::clock_gettime(CLOCK_REALTIME, &t);
  return int64_t(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

// The kinds of entry (the head's second u32; 0 in every entry before parts existed).
constexpr uint32_t kWhole = 0, kPart = 1;
const char* suffix_of(bool part) { return part ? ".part" : ".state"; }

std::string tokens_name(const std::string& key, std::span<const int32_t> tokens, bool part) {
  return key + "-" + hex16(XXH3_64bits(tokens.data(), tokens.size_bytes())) + suffix_of(part);
}

// Buffered writes to a file, hashed as they go.
class FileSink final : public model::StateSink {
 public:
  FileSink(int fd, std::string path) : fd_(fd), path_(std::move(path)), hash_(new_hasher()) {
    buf_.reserve(kBufferBytes);
  }
  void write(const void* data, size_t n) override {
    XXH3_64bits_update(hash_.get(), data, n);
    written_ += n;
    const auto* p = static_cast<const uint8_t*>(data);
    if (buf_.size() + n > kBufferBytes) flush();
    if (n >= kBufferBytes) return put(p, n);
    buf_.insert(buf_.end(), p, p + n);
  }
  void flush() {
    put(buf_.data(), buf_.size());
    buf_.clear();
  }
  uint64_t digest() const { return XXH3_64bits_digest(hash_.get()); }
  uint64_t written() const { return written_; }

 private:
  void put(const uint8_t* p, size_t n) { write_all(fd_, p, n, path_); }
  int fd_;
  std::string path_;
  Hasher hash_;
  std::vector<uint8_t> buf_;
  uint64_t written_ = 0;
};

// Reads of a file through a buffer, hashed as they go; `limit` bounds what the state may read.
class FileSource final : public model::StateSource {
 public:
  FileSource(int fd, uint64_t file_size) : fd_(fd), hash_(new_hasher()) {
    buf_.resize(size_t(std::clamp<uint64_t>(file_size, 4096, kBufferBytes)));
  }
  void read(void* data, size_t n) override {
    if (n > limit_) fail("the state wants ", n, " bytes more than its entry holds");
    limit_ -= n;
    take(data, n);
  }
  uint64_t remaining() const override { return limit_; }
  void set_limit(uint64_t n) { limit_ = n; }
  // Reads n bytes outside the state's part (head, tokens, tail).
  void take(void* data, size_t n) {
    auto* p = static_cast<uint8_t*>(data);
    while (n > 0) {
      size_t k = 0;
      if (at_ < end_) {
        k = std::min(n, end_ - at_);
        std::memcpy(p, buf_.data() + at_, k);
        at_ += k;
      } else if (n >= buf_.size()) {  // large reads go straight to their destination
        k = fill(p, n);
      } else {
        at_ = 0;
        end_ = fill(buf_.data(), buf_.size());
        continue;
      }
      XXH3_64bits_update(hash_.get(), p, k);
      p += k;
      n -= k;
    }
  }
  uint64_t digest() const { return XXH3_64bits_digest(hash_.get()); }
  // The last 8 bytes (the checksum, outside the hash); nothing may follow them.
  uint64_t checksum_at_end() {
    uint8_t b[8];
    for (size_t got = 0; got < 8;) {
      if (at_ == end_) {
        at_ = 0;
        end_ = fill(buf_.data(), buf_.size());
      }
      const size_t k = std::min(8 - got, end_ - at_);
      std::memcpy(b + got, buf_.data() + at_, k);
      at_ += k;
      got += k;
    }
    uint8_t extra;
    if (at_ != end_ || ::read(fd_, &extra, 1) != 0) fail("bytes follow its checksum");
    return get_u64(b);
  }

 private:
  // At least one byte, or fails at the end of the file.
  size_t fill(uint8_t* p, size_t n) {
    for (;;) {
      const ssize_t r = ::read(fd_, p, n);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) fail("read failed: ", std::strerror(errno));
      if (r == 0) fail("the file ends early (truncated)");
      return size_t(r);
    }
  }
  int fd_;
  Hasher hash_;
  std::vector<uint8_t> buf_;
  size_t at_ = 0, end_ = 0;
  uint64_t limit_ = 0;
};

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// What an entry file's head and tail say, checked against its size; tokens filled.
struct EntryHead {
  std::vector<int32_t> tokens;
  uint64_t payload = 0;
};

// Reads and checks the head and the tokens: magic, version, kind, key, the token count against the
// file's size; returns the tokens and the size left for the state. Throws naming what is wrong.
EntryHead read_head(FileSource& in, const std::string& key, uint64_t size, bool part) {
  if (size < kHeadBytes + kTailBytes) fail("only ", size, " bytes (truncated)");
  uint8_t head[kHeadBytes];
  in.take(head, sizeof head);
  if (std::memcmp(head, kMagic, sizeof kMagic) != 0) fail("not a sluice state entry (magic)");
  if (get_u32(head + 8) != kVersion) fail("entry version ", get_u32(head + 8), ", this sluice writes ", kVersion);
  if (get_u32(head + 12) != (part ? kPart : kWhole))
    fail(part ? "not a recurrent part (kind " : "not a whole state (kind ", get_u32(head + 12), ")");
  std::string entry_key(reinterpret_cast<const char*>(head + 16), kKeyChars);
  if (entry_key != key) {
    for (char& c : entry_key)
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '?';
    fail("an entry of another model or device (key ", entry_key, ", this one ", key, ")");
  }
  const uint64_t n = get_u64(head + 16 + kKeyChars);
  if (n == 0 || n > (size - kHeadBytes - kTailBytes) / 4) fail(n, " tokens do not fit its ", size, " bytes (truncated)");
  EntryHead h;
  h.tokens.resize(n);
  in.take(h.tokens.data(), n * 4);
  for (int32_t t : h.tokens)
    if (t < 0) fail("a negative token id");
  h.payload = size - kHeadBytes - n * 4 - kTailBytes;
  return h;
}

// The payload size the tail records (read after the payload).
uint64_t read_payload_size(FileSource& in) {
  uint8_t b[8];
  in.take(b, 8);
  return get_u64(b);
}

bool process_alive(long pid) { return pid > 0 && (::kill(pid_t(pid), 0) == 0 || errno == EPERM); }

}  // namespace

StateCache::StateCache(StateCacheOptions opt, std::string model_key) : opt_(std::move(opt)), key_(std::move(model_key)) {
  SLUICE_CHECK(key_.size() == kKeyChars, "state cache key must be ", kKeyChars, " characters");
  SLUICE_CHECK(opt_.budget_bytes > 0, "--state-cache-gb must be positive");
  std::error_code ec;
  fs::create_directories(opt_.dir, ec);
  if (ec) fail(opt_.dir, ": cannot create the state cache directory: ", ec.message());
  if (!fs::is_directory(opt_.dir)) fail(opt_.dir, ": the state cache must be a directory");
  scan();
  std::lock_guard<std::mutex> lock(mu_);
  evict_to(opt_.budget_bytes, "");
}

void StateCache::warn(const std::string& line) const {
  if (opt_.warn) opt_.warn(line);
  else std::fprintf(stderr, "sluice: warning: state cache: %s\n", line.c_str());
}

void StateCache::scan() {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string prefix = key_ + "-", tmp_prefix = "." + key_ + "-";
  std::vector<std::string> names;
  std::error_code ec;
  for (auto it = fs::directory_iterator(opt_.dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    names.push_back(it->path().filename().string());
  if (ec) fail(opt_.dir, ": cannot list the state cache: ", ec.message());
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    if (name.rfind(tmp_prefix, 0) == 0) {
      // A writer that died before its rename left this; one that still runs is left alone.
      const size_t at = name.rfind(".tmp-");
      if (at != std::string::npos && !process_alive(std::atol(name.c_str() + at + 5))) ::unlink(path(name).c_str());
      continue;
    }
    auto ends_with = [&](const std::string& tail) {
      return name.size() >= tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
    };
    const bool part = ends_with(suffix_of(true));
    if (name.rfind(prefix, 0) != 0 || !(part || ends_with(suffix_of(false)))) continue;
    const std::string p = path(name);
    try {
      std::string why;
      Fd f{open_regular(p, O_RDONLY, why)};
      if (f.fd < 0) fail(why);
      struct stat sb {};
      if (::fstat(f.fd, &sb) != 0) fail("fstat: ", std::strerror(errno));
      FileSource in(f.fd, uint64_t(sb.st_size));
      EntryHead h = read_head(in, key_, uint64_t(sb.st_size), part);
      if (name != tokens_name(key_, h.tokens, part)) fail("its name does not match its tokens");
      if (::lseek(f.fd, -off_t(kTailBytes), SEEK_END) < 0) fail("seek: ", std::strerror(errno));
      uint8_t tail[kTailBytes];
      if (::read(f.fd, tail, sizeof tail) != ssize_t(sizeof tail)) fail("cannot read its tail");
      if (get_u64(tail) != h.payload)
        fail("its tail records ", get_u64(tail), " state bytes, the file holds ", h.payload, " (truncated or extended)");
      entries_.push_back({name, std::move(h.tokens), uint64_t(sb.st_size),
                          int64_t(sb.st_mtim.tv_sec) * 1'000'000'000 + sb.st_mtim.tv_nsec, part});
      bytes_ += uint64_t(sb.st_size);
    } catch (const std::exception& e) {
      ::unlink(p.c_str());
      ++counters_.discarded;
      warn(cat(p, ": ", e.what(), "; discarded"));
    }
  }
}

void StateCache::discard(size_t i, const std::string& why) {
  const std::string p = path(entries_[i].file);
  ::unlink(p.c_str());
  bytes_ -= entries_[i].bytes;
  entries_.erase(entries_.begin() + std::ptrdiff_t(i));
  ++counters_.discarded;
  warn(cat(p, ": ", why, "; discarded"));
}

void StateCache::evict_to(uint64_t budget, const std::string& keep) {
  while (bytes_ > budget) {
    size_t oldest = entries_.size();
    for (size_t i = 0; i < entries_.size(); ++i)
      if (entries_[i].file != keep && (oldest == entries_.size() || entries_[i].used < entries_[oldest].used)) oldest = i;
    if (oldest == entries_.size()) return;
    ::unlink(path(entries_[oldest].file).c_str());
    bytes_ -= entries_[oldest].bytes;
    entries_.erase(entries_.begin() + std::ptrdiff_t(oldest));
    ++counters_.evicted;
  }
}

void StateCache::touch(Entry& e) {
  int64_t latest = 0;
  for (const Entry& o : entries_) latest = std::max(latest, o.used);
  e.used = std::max(now_ns(), latest + 1);
  // Recency survives a restart as the file's modification time, set to the exact value (the
  // kernel's own clock for file times is coarser than the interval between two uses).
  const timespec times[2] = {{0, UTIME_OMIT}, {time_t(e.used / 1'000'000'000), long(e.used % 1'000'000'000)}};
  ::utimensat(AT_FDCWD, path(e.file).c_str(), times, 0);
}

StateCache::Plan StateCache::plan_for(bool cut, std::span<const int32_t> prompt, size_t longer_than) const {
  // The longest usable prefix; ties: the smallest whole entry, then the newest; a part over a
  // whole entry (two files) only where it gives more.
  const size_t none = entries_.size();
  auto preferred = [&](size_t a, size_t b) {  // whole entry a over b, for the same prefix
    const Entry &x = entries_[a], &y = entries_[b];
    return x.bytes < y.bytes || (x.bytes == y.bytes && x.used > y.used);
  };
  Plan plan{none, none, longer_than};
  std::vector<size_t> shared(entries_.size(), 0);  // each whole entry's common prefix with the prompt
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    if (e.part) continue;
    const size_t common = shared[i] = common_prefix(e.tokens, prompt);
    size_t use = 0;
    if (cut) use = std::min(common, prompt.size() - 1);
    else if (common == e.tokens.size() && common < prompt.size()) use = common;
    if (use <= longer_than) continue;
    if (plan.whole == none || use > plan.use || (use == plan.use && preferred(i, plan.whole))) plan = {i, none, use};
  }
  if (cut) return plan;
  // A part of p prompt tokens over the smallest whole entry that holds the same p tokens or more.
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    const size_t p = e.tokens.size();
    if (!e.part || p <= plan.use || p >= prompt.size() || !std::equal(e.tokens.begin(), e.tokens.end(), prompt.begin()))
      continue;
    size_t base = none;
    for (size_t k = 0; k < entries_.size(); ++k)
      if (!entries_[k].part && shared[k] >= p && (base == none || preferred(k, base))) base = k;
    if (base != none) plan = {base, i, p};
  }
  return plan;
}

size_t StateCache::usable(const model::Target& m, std::span<const int32_t> prompt) const {
  if (prompt.empty()) return 0;
  std::lock_guard<std::mutex> lock(mu_);
  const Plan plan = plan_for(m.can_truncate(), prompt, 0);
  return plan.whole < entries_.size() ? plan.use : 0;
}

size_t StateCache::shared_prefix(std::span<const int32_t> prompt) const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t shared = 0;
  for (const Entry& e : entries_) shared = std::max(shared, common_prefix(e.tokens, prompt));
  return prompt.empty() ? 0 : std::min(shared, prompt.size() - 1);
}

void StateCache::read_entry(const Entry& e, const std::function<void(model::StateSource&)>& read) {
  std::string why;
  Fd f{open_regular(path(e.file), O_RDONLY, why)};
  if (f.fd < 0) fail(why);
  struct stat sb {};
  if (::fstat(f.fd, &sb) != 0) fail("fstat: ", std::strerror(errno));
  FileSource in(f.fd, uint64_t(sb.st_size));
  EntryHead h = read_head(in, key_, uint64_t(sb.st_size), e.part);
  if (h.tokens != e.tokens) fail("its tokens changed since it was scanned");
  in.set_limit(h.payload);
  read(in);
  if (in.remaining() != 0) fail(in.remaining(), " state bytes left unread");
  if (read_payload_size(in) != h.payload) fail("its tail does not record its state's size");
  const uint64_t want = in.digest(), got = in.checksum_at_end();
  if (want != got) fail("checksum mismatch (xxh3 ", hex16(got), " recorded, ", hex16(want), " read)");
}

size_t StateCache::restore(const model::Target& m, model::State& st, std::span<const int32_t> prompt,
                           size_t longer_than) {
  std::lock_guard<std::mutex> lock(mu_);
  const bool cut = m.can_truncate();
  for (;;) {
    const Plan plan = plan_for(cut, prompt, longer_than);
    if (plan.whole == entries_.size()) return 0;
    // An entry removed by another process sharing the directory (before or while it is read)
    // leaves the list quietly; one that fails its checks is discarded with a warning.
    auto drop = [&](size_t i, const char* why) {
      if (fs::exists(path(entries_[i].file))) return discard(i, why);
      bytes_ -= entries_[i].bytes;
      entries_.erase(entries_.begin() + std::ptrdiff_t(i));
    };
    const auto t0 = std::chrono::steady_clock::now();
    const Entry& w = entries_[plan.whole];
    bool touched_state = false;
    try {
      read_entry(w, [&](model::StateSource& in) {
        touched_state = true;
        m.read_state(st, in);
      });
      if (st.length() != int64_t(w.tokens.size())) fail("a state of length ", st.length(), " for ", w.tokens.size(), " tokens");
      if (plan.part == entries_.size() && plan.use < w.tokens.size() && !m.truncate(st, int64_t(plan.use)))
        fail("the state cannot be cut back");
    } catch (const std::exception& ex) {
      if (touched_state) st.reset();
      drop(plan.whole, ex.what());
      continue;
    }
    if (plan.part < entries_.size()) {
      // The part's recurrent state over the whole one's cache rows, which hold its tokens too.
      try {
        const Entry& part = entries_[plan.part];
        read_entry(part, [&](model::StateSource& in) { m.read_recurrent(st, in); });
        if (st.length() != int64_t(part.tokens.size()))
          fail("a recurrent part of length ", st.length(), " for ", part.tokens.size(), " tokens");
      } catch (const std::exception& ex) {
        st.reset();
        drop(plan.part, ex.what());
        continue;
      }
      touch(entries_[plan.part]);
      ++counters_.part_restores;
    }
    touch(entries_[plan.whole]);
    ++counters_.restores;
    counters_.restored_tokens += int64_t(plan.use);
    counters_.restore_ms += ms_since(t0);
    return plan.use;
  }
}

void StateCache::save(const model::Target& m, const model::State& st, std::span<const int32_t> tape) {
  if (tape.empty() || st.length() != int64_t(tape.size())) return;
  write_entry(m, tape, false, [&](model::StateSink& out) { m.write_state(st, out); });
}

void StateCache::save_part(const model::Target& m, const model::State& st, std::span<const int32_t> tokens) {
  if (m.can_truncate() || tokens.empty() || st.length() != int64_t(tokens.size())) return;
  write_entry(m, tokens, true, [&](model::StateSink& out) { m.write_recurrent(st, out); });
}

void StateCache::write_entry(const model::Target& m, std::span<const int32_t> tape, bool part,
                             const std::function<void(model::StateSink&)>& write) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string name = tokens_name(key_, tape, part);
  for (Entry& e : entries_)
    if (e.file == name && std::equal(e.tokens.begin(), e.tokens.end(), tape.begin(), tape.end())) {
      touch(e);
      return;
    }
  const auto t0 = std::chrono::steady_clock::now();
  const char* what = part ? "a recurrent part" : "a state";
  try {
    // A hidden temporary that load-time cleanup recognises (and removes once its writer is gone).
    PendingFile f(path(name), path(cat(".", name, ".tmp-", ::getpid())));
    const std::string& tmp = f.tmp();
    FileSink out(f.fd(), tmp);
    uint8_t head[kHeadBytes] = {};
    std::memcpy(head, kMagic, sizeof kMagic);
    put_u32(head + 8, kVersion);
    put_u32(head + 12, part ? kPart : kWhole);
    std::memcpy(head + 16, key_.data(), kKeyChars);
    put_u64(head + 16 + kKeyChars, tape.size());
    out.write(head, sizeof head);
    out.write(tape.data(), tape.size_bytes());
    const uint64_t before = out.written();
    write(out);
    uint8_t tail[8];
    put_u64(tail, out.written() - before);
    out.write(tail, 8);
    put_u64(tail, out.digest());
    out.flush();
    write_all(f.fd(), tail, 8, tmp);
    const uint64_t size = out.written() + 8;
    if (size > opt_.budget_bytes) {
      f.abandon();
      if (!warned_too_large_)
        warn(cat(what, " of ", size, " bytes (", tape.size(), " tokens) is larger than the whole budget (",
                 opt_.budget_bytes, " bytes); not saved"));
      warned_too_large_ = true;
      return;
    }
    evict_to(opt_.budget_bytes - size, name);
    f.commit();
    std::erase_if(entries_, [&](const Entry& e) {
      // Same name (a hash collision: the file was replaced), or a prefix the new state stands for.
      const bool prefix = !part && !e.part && m.can_truncate() && e.tokens.size() < tape.size() &&
                          std::equal(e.tokens.begin(), e.tokens.end(), tape.begin());
      if (e.file != name && !prefix) return false;
      if (e.file != name) {
        ::unlink(path(e.file).c_str());
        ++counters_.evicted;
      }
      bytes_ -= e.bytes;
      return true;
    });
    entries_.push_back({name, std::vector<int32_t>(tape.begin(), tape.end()), size, 0, part});
    bytes_ += size;
    touch(entries_.back());
    ++(part ? counters_.parts_saved : counters_.saves);
    counters_.saved_bytes += size;
    counters_.save_ms += ms_since(t0);
  } catch (const std::exception& e) {  // the pending file removed its temporary
    warn(cat("saving ", what, " of ", tape.size(), " tokens failed: ", e.what()));
  }
}

size_t StateCache::entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

uint64_t StateCache::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

StateCache::Counters StateCache::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

std::string state_cache_key(const std::string& model_dir, const std::string& device_name) {
  Hasher h = new_hasher();
  auto add = [&](const void* p, size_t n) { XXH3_64bits_update(h.get(), p, n); };
  auto add_text = [&](const std::string& s) {
    const uint64_t n = s.size();
    add(&n, sizeof n);
    add(s.data(), s.size());
  };
  add_text(cat("sluice-state-v", kVersion));
  add_text(device_name);
  add_text(read_regular_file(model_dir + "/config.json"));
  std::vector<std::string> shards;
  for (const fs::directory_entry& de : fs::directory_iterator(model_dir))
    if (de.path().extension() == ".safetensors" && de.path().filename() != "expected.safetensors")
      shards.push_back(de.path().filename().string());
  std::sort(shards.begin(), shards.end());
  std::vector<uint8_t> buf;
  for (const std::string& s : shards) {
    const std::string p = model_dir + "/" + s;
    Fd f{open_regular_or_fail(p, O_RDONLY)};
    struct stat sb {};
    if (::fstat(f.fd, &sb) != 0) fail(p, ": fstat: ", std::strerror(errno));
    const uint64_t size = uint64_t(sb.st_size);
    add_text(s);
    add(&size, sizeof size);
    // The header (names, dtypes, shapes, offsets) and the first and last 64 KiB of the data.
    uint8_t len8[8] = {};
    const uint64_t header = ::pread(f.fd, len8, 8, 0) == 8 ? get_u64(len8) : 0;
    const uint64_t data0 = std::min(size, 8 + std::min<uint64_t>(header, size));
    auto add_range = [&](uint64_t at, uint64_t n) {
      buf.resize(n);
      ssize_t got = n ? ::pread(f.fd, buf.data(), n, off_t(at)) : 0;
      if (got != ssize_t(n)) fail(p, ": cannot read ", n, " bytes at ", at);
      add(buf.data(), n);
    };
    constexpr uint64_t kSample = 64 << 10;
    add_range(0, data0);
    add_range(data0, std::min(kSample, size - data0));
    if (size - data0 > kSample) {
      const uint64_t last = std::max(size - kSample, data0 + kSample);
      add_range(last, size - last);
    }
  }
  return hex16(XXH3_64bits_digest(h.get()));
}

}  // namespace sluice::runtime
