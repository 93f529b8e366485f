// A loopback HTTP server for fetch tests (cpp-httplib): serves a directory with Range support and
// injects faults on request — a dropped connection mid-file, wrong bytes, 404 — and counts what
// it served, so tests can tell a resumed download from a restarted one.
#pragma once
#include <httplib.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>

namespace sluice::testing {

class FileServer {
 public:
  explicit FileServer(std::string root) : root_(std::move(root)) {
    server_.Get(R"(/(.+))", [this](const httplib::Request& req, httplib::Response& res) { serve(req, res); });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // Bound already: connections wait in the backlog until listen starts.
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FileServer() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // Faults (each applies to one file name).
  void set_missing(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    missing_.insert(name);
  }
  // The next `times` responses for `name` stop after `after` body bytes and close the connection.
  void drop_after(const std::string& name, size_t after, int times = 1) {
    std::lock_guard<std::mutex> lock(mu_);
    drop_name_ = name;
    drop_after_ = after;
    drop_times_ = times;
  }
  // Bytes [begin, end) of `name` are served XORed with `mask`, or replaced by it with `fill`.
  void corrupt(const std::string& name, size_t begin, size_t end, uint8_t mask = 0x5a, bool fill = false) {
    corrupt_fill_ = fill;
    std::lock_guard<std::mutex> lock(mu_);
    corrupt_name_ = name;
    corrupt_begin_ = begin;
    corrupt_end_ = end;
    corrupt_mask_ = mask;
  }
  void clear_faults() {
    std::lock_guard<std::mutex> lock(mu_);
    missing_.clear();
    drop_times_ = 0;
    corrupt_name_.clear();
  }
  uint64_t served(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    return served_[name];
  }
  std::map<std::string, uint64_t> served_all() {
    std::lock_guard<std::mutex> lock(mu_);
    return served_;
  }
  uint64_t served_total() {
    std::lock_guard<std::mutex> lock(mu_);
    uint64_t n = 0;
    for (auto& [k, v] : served_) n += v;
    return n;
  }

 private:
  void serve(const httplib::Request& req, httplib::Response& res) {
    std::string name = req.matches[1];
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (missing_.count(name) || name.find("..") != std::string::npos) {
        res.status = 404;
        return;
      }
    }
    std::string path = root_ + "/" + name;
    if (!std::filesystem::is_regular_file(path)) {
      res.status = 404;
      return;
    }
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    auto data = std::make_shared<std::string>(ss.str());
    res.set_content_provider(data->size(), "application/octet-stream",
                             [this, data, name](size_t offset, size_t length, httplib::DataSink& sink) {
                               std::string chunk = data->substr(offset, length);
                               size_t limit = chunk.size();
                               bool drop = false;
                               {
                                 std::lock_guard<std::mutex> lock(mu_);
                                 if (name == corrupt_name_)
                                   for (size_t i = 0; i < chunk.size(); ++i)
                                     if (offset + i >= corrupt_begin_ && offset + i < corrupt_end_)
                                       chunk[i] = char(corrupt_fill_ ? corrupt_mask_ : uint8_t(chunk[i]) ^ corrupt_mask_);
                                 if (name == drop_name_ && drop_times_ > 0 && chunk.size() > drop_after_) {
                                   --drop_times_;
                                   limit = drop_after_;
                                   drop = true;
                                 }
                                 served_[name] += limit;
                               }
                               if (limit) sink.write(chunk.data(), limit);
                               return !drop;  // false closes the connection mid-body
                             });
  }

  std::string root_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::set<std::string> missing_;
  std::string drop_name_, corrupt_name_;
  size_t drop_after_ = 0, corrupt_begin_ = 0, corrupt_end_ = 0;
  int drop_times_ = 0;
  uint8_t corrupt_mask_ = 0x5a;
  bool corrupt_fill_ = false;
  std::map<std::string, uint64_t> served_;
};

}  // namespace sluice::testing
