// HTTP(S) source over libcurl (Range requests, redirects, retries that resume) and a local
// directory source with the same interface.
#include "fetch/source.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/regular_file.h"

namespace sluice::fetch {
namespace fs = std::filesystem;

void Source::read_into(const std::string& name, uint64_t begin, uint64_t end, std::byte* dst) {
  uint64_t at = 0;
  read(name, begin, end, [&](const std::byte* p, size_t n) {
    std::memcpy(dst + at, p, n);
    at += n;
  });
}

std::string Source::read_text(const std::string& name, uint64_t max_bytes) {
  RemoteFile f = stat(name);
  if (!f.found) fail(where(name), ": not found in the source");
  if (f.size > max_bytes) fail(where(name), ": ", f.size, " bytes, more than the ", max_bytes, " expected of this file");
  std::string text(size_t(f.size), '\0');
  read_into(name, 0, f.size, reinterpret_cast<std::byte*>(text.data()));
  return text;
}

namespace {

bool is_sha256_hex(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// ---- local directory -------------------------------------------------------------------------

class DirSource : public Source {
 public:
  explicit DirSource(std::string dir) : dir_(std::move(dir)) {
    std::error_code ec;
    if (!fs::is_directory(dir_, ec)) fail("--source ", dir_, ": not a directory and not an http(s):// URL");
  }
  const std::string& root() const override { return dir_; }
  std::string where(const std::string& name) const override { return dir_ + "/" + name; }
  RemoteFile stat(const std::string& name) override {
    RemoteFile f;
    std::error_code ec;
    if (!fs::is_regular_file(where(name), ec)) return f;
    f.found = true;
    f.size = fs::file_size(where(name), ec);
    if (ec) fail(where(name), ": cannot stat: ", ec.message());
    return f;
  }
  void read(const std::string& name, uint64_t begin, uint64_t end,
            const std::function<void(const std::byte*, size_t)>& sink) override {
    std::string path = where(name);
    std::string why;
    int fd = open_regular(path, O_RDONLY, why);  // a FIFO in the source must not block setup
    if (fd < 0) fail(path, ": cannot open: ", why);
    std::vector<std::byte> buf(size_t(std::min<uint64_t>(end - begin, 4ull << 20)) + 1);
    uint64_t pos = begin;
    while (pos < end) {
      ssize_t r = ::pread(fd, buf.data(), size_t(std::min<uint64_t>(end - pos, buf.size())), off_t(pos));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        int err = errno;
        ::close(fd);
        if (r == 0) fail(path, ": file ends at byte ", pos, " but bytes up to ", end, " were expected");
        fail(path, ": read failed at byte ", pos, ": ", std::strerror(err));
      }
      try {
        sink(buf.data(), size_t(r));
      } catch (...) {
        ::close(fd);
        throw;
      }
      pos += uint64_t(r);
    }
    ::close(fd);
  }

 private:
  std::string dir_;
};

// ---- HTTP(S) -----------------------------------------------------------------------------------

struct CurlGlobal {
  CurlGlobal() { curl_global_init(CURL_GLOBAL_DEFAULT); }
};

struct Transfer {
  // Headers of the last response (a redirect starts a new set) plus HF's X-Linked-* from any.
  std::map<std::string, std::string> headers, linked;
  uint64_t begin = 0, end = 0, delivered = 0;
  bool started = false;
  std::string refusal;  // why the body was refused (wrong status, wrong range, too many bytes)
  const std::function<void(const std::byte*, size_t)>* sink = nullptr;
  std::exception_ptr sink_error;
  CURL* curl = nullptr;
};

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::string line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) {
    t->headers.clear();
  } else if (size_t colon = line.find(':'); colon != std::string::npos) {
    std::string key = lower(line.substr(0, colon));
    std::string value = line.substr(colon + 1);
    while (!value.empty() && std::isspace(static_cast<unsigned char>(value.front()))) value.erase(0, 1);
    while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back()))) value.pop_back();
    t->headers[key] = value;
    if (key.rfind("x-linked-", 0) == 0) t->linked[key] = value;
  }
  return size * n;
}

// Checks the response before the first body byte: 206 with a Content-Range starting at `begin`
// (or 200 for a request of a whole file from byte 0).
bool accept_body(Transfer& t) {
  long code = 0;
  curl_easy_getinfo(t.curl, CURLINFO_RESPONSE_CODE, &code);
  if (code == 206) {
    auto it = t.headers.find("content-range");
    unsigned long long a = 0, b = 0;
    if (it == t.headers.end() || std::sscanf(it->second.c_str(), "bytes %llu-%llu", &a, &b) != 2 || a != t.begin) {
      t.refusal = cat("answered 206 with Content-Range '", it == t.headers.end() ? "" : it->second,
                      "' for a request starting at byte ", t.begin);
      return false;
    }
    return true;
  }
  if (code == 200 && t.begin == 0) return true;  // whole body; its length is checked as it arrives
  if (code == 200) {
    t.refusal = "ignored the Range request (answered 200 instead of 206); the source must support HTTP ranges";
    return false;
  }
  t.refusal = cat("answered HTTP ", code);
  return false;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t len = size * n;
  if (!t->started) {
    if (!accept_body(*t)) return 0;
    t->started = true;
  }
  uint64_t want = t->end - t->begin;
  size_t take = size_t(std::min<uint64_t>(len, want - t->delivered));
  try {
    if (take) (*t->sink)(reinterpret_cast<const std::byte*>(data), take);
  } catch (...) {
    t->sink_error = std::current_exception();
    return 0;
  }
  t->delivered += take;
  if (take < len) {
    // A 200 answer to a request from byte 0 carries the whole file; stop once we have enough.
    long code = 0;
    curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &code);
    if (code != 200) t->refusal = cat("sent more than the ", want, " bytes asked for");
    return 0;
  }
  return len;
}

bool transient(CURLcode rc, long code) {
  if (rc == CURLE_OK) return code == 429 || code >= 500;
  return rc == CURLE_PARTIAL_FILE || rc == CURLE_RECV_ERROR || rc == CURLE_SEND_ERROR ||
         rc == CURLE_COULDNT_CONNECT || rc == CURLE_OPERATION_TIMEDOUT || rc == CURLE_GOT_NOTHING ||
         rc == CURLE_HTTP2 || rc == CURLE_HTTP2_STREAM || rc == CURLE_SSL_CONNECT_ERROR;
}

class HttpSource : public Source {
 public:
  HttpSource(std::string url, const SourceOptions& opt) : given_(url), opt_(opt) {
    static CurlGlobal global;
    while (!url.empty() && url.back() == '/') url.pop_back();
    // A repository page URL on the Hub serves files under /resolve/<revision>/.
    bool hub = url.find("://huggingface.co/") != std::string::npos || url.find("://hf.co/") != std::string::npos;
    if (hub && url.find("/resolve/") == std::string::npos) url += "/resolve/main";
    base_ = url;
    if (const char* token = std::getenv("HF_TOKEN"); token && *token) auth_ = cat("Authorization: Bearer ", token);
  }
  const std::string& root() const override { return given_; }
  std::string where(const std::string& name) const override { return base_ + "/" + name; }

  RemoteFile stat(const std::string& name) override {
    // A one-byte range answers with the size (Content-Range) and proves range support at once.
    for (int attempt = 0;; ++attempt) {
      Transfer t;
      auto [rc, code] = perform(name, 0, 1, t, nullptr);
      bool retry = (rc != CURLE_OK && transient(rc, code)) || code >= 500 || code == 429;
      if (retry && attempt < opt_.retries) {
        std::this_thread::sleep_for(std::chrono::duration<double>(opt_.retry_delay_s * (1 << attempt)));
        continue;
      }
      if (rc != CURLE_OK) fail(where(name), ": ", curl_easy_strerror(rc));
      RemoteFile f;
      if (code == 404) return f;
      f.found = true;
      auto header = [&](const char* key) {
        auto it = t.headers.find(key);
        return it == t.headers.end() ? std::string() : it->second;
      };
      unsigned long long total = 0;
      if (code == 206 && std::sscanf(header("content-range").c_str(), "bytes %*u-%*u/%llu", &total) == 1) {
        f.size = total;
      } else if (code == 416 && std::sscanf(header("content-range").c_str(), "bytes */%llu", &total) == 1) {
        f.size = total;  // an empty file has no byte 0
      } else if (code == 200 && std::sscanf(header("content-length").c_str(), "%llu", &total) == 1) {
        f.size = total;
      } else {
        fail(where(name), ": cannot learn the size (HTTP ", code, ", Content-Range '", header("content-range"), "')");
      }
      std::string tag = t.linked.count("x-linked-etag") ? t.linked["x-linked-etag"] : header("etag");
      if (tag.rfind("W/", 0) == 0) tag.erase(0, 2);
      tag.erase(std::remove(tag.begin(), tag.end(), '"'), tag.end());
      if (is_sha256_hex(tag)) f.sha256 = lower(tag);  // LFS files: the ETag is the file's SHA-256
      return f;
    }
  }

  void read(const std::string& name, uint64_t begin, uint64_t end,
            const std::function<void(const std::byte*, size_t)>& sink) override {
    uint64_t pos = begin;
    std::string errors;
    std::function<void(const std::byte*, size_t)> counted = [&](const std::byte* p, size_t n) {
      sink(p, n);
      pos += n;
    };
    for (int attempt = 0; pos < end; ++attempt) {
      Transfer t;
      uint64_t before = pos;
      auto [rc, code] = perform(name, pos, end, t, &counted);
      if (code == 404) fail(where(name), ": not found (HTTP 404)");
      std::string why;
      bool retry = false;
      if (code >= 500 || code == 429) {
        why = cat("HTTP ", code);
        retry = true;
      } else if (!t.refusal.empty()) {
        fail(where(name), " bytes ", before, "-", end, ": the server ", t.refusal);
      } else if (rc != CURLE_OK) {
        why = curl_easy_strerror(rc);
        retry = transient(rc, code);
        if (!retry) fail(where(name), " bytes ", before, "-", end, ": ", why);
      } else if (pos < end) {
        why = cat("the response ended at byte ", pos);
        retry = true;
      }
      if (pos == end) return;
      errors += cat(errors.empty() ? "" : "; ", why, " at byte ", pos);
      if (!retry || attempt >= opt_.retries)
        fail(where(name), ": gave up after ", attempt + 1, " attempts at byte ", pos, " of ", end, " (", errors, ")");
      std::this_thread::sleep_for(std::chrono::duration<double>(opt_.retry_delay_s * (1 << std::min(attempt, 10))));
    }
  }

 private:
  // One request for [begin, end): the curl result and the HTTP status. With sink == nullptr the
  // body is discarded (size probes).
  std::pair<CURLcode, long> perform(const std::string& name, uint64_t begin, uint64_t end, Transfer& t,
                                    const std::function<void(const std::byte*, size_t)>* sink) {
    CURL* c = curl_easy_init();
    if (!c) fail("libcurl: curl_easy_init failed");
    std::unique_ptr<CURL, void (*)(CURL*)> guard(c, curl_easy_cleanup);
    t.curl = c;
    t.begin = begin;
    t.end = end;
    t.sink = sink;
    std::string url = where(name);
    std::string range = cat(begin, "-", end - 1);
    curl_slist* hdrs = nullptr;
    if (!auth_.empty()) hdrs = curl_slist_append(hdrs, auth_.c_str());
    std::unique_ptr<curl_slist, void (*)(curl_slist*)> hguard(hdrs, curl_slist_free_all);
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, opt_.connect_timeout_s);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, opt_.stall_timeout_s);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "sluice/0.1");
    curl_easy_setopt(c, CURLOPT_RANGE, range.c_str());
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
    if (hdrs) curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    if (!sink) {
      curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, +[](char*, size_t s, size_t n, void*) { return s * n; });
    } else {
      curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
      curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
    }
    CURLcode rc = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    if (t.sink_error) std::rethrow_exception(t.sink_error);
    // Our own stop after a whole-file 200 answer delivered enough bytes is not an error.
    if (rc == CURLE_WRITE_ERROR && t.refusal.empty() && t.delivered == end - begin) rc = CURLE_OK;
    return {rc, code};
  }

  std::string given_, base_, auth_;
  SourceOptions opt_;
};

}  // namespace

std::unique_ptr<Source> open_source(const std::string& url_or_dir, const SourceOptions& opt) {
  if (url_or_dir.rfind("http://", 0) == 0 || url_or_dir.rfind("https://", 0) == 0)
    return std::make_unique<HttpSource>(url_or_dir, opt);
  return std::make_unique<DirSource>(url_or_dir);
}

}  // namespace sluice::fetch
