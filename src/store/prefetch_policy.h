// Which guesses at coming layers' routes the RAM store reads ahead: the prefetch policy, apart
// from the cache that holds what is read (StreamingExperts) and the reader that reads it.
//
// The model hands over a guess per layer and distance (1: from the layer just before it), in
// confidence order. Every guess is scored when its layer's request arrives, rank by rank, into an
// average of how often that rank was right (store/guess_precision.h). When the drives are the
// bottleneck a right guess saves no bandwidth (the expert would have been read anyway, only later)
// and moves a read into the little time the drives would idle during compute, while a wrong guess
// costs a whole read: guessing pays only when it is nearly always right. So rank r of a layer is
// read ahead only once its precision is at least StreamOptions::prefetch_min_precision
// (earned()). With --prefetch-idle, next-layer guesses that have not earned it are read as long as
// the drives' idle time in a layer's period allows (DriveSpare: Allowance). Guesses beyond the
// next layer are read only while the drives idle (lookahead()).
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "store/drive_spare.h"

namespace sluice::store {

// The most layers ahead StreamOptions::prefetch_layers may reach (the reference system read 4).
inline constexpr int kMaxPrefetchLayers = 4;

class PrefetchPolicy {
 public:
  // A bank of `layers` layers; guesses up to `layers_ahead` layers ahead (1..kMaxPrefetchLayers),
  // a rank read once its precision is at least `min_precision` (0..1; 0 reads every guess), idle
  // guesses (--prefetch-idle) when `idle_guesses`. Bad values are refused naming the flag.
  PrefetchPolicy(int64_t layers, bool on, int layers_ahead, double min_precision, bool idle_guesses);

  // How many layers ahead the model should guess now: 0 (off), 1, or layers_ahead while the drives
  // idle.
  int lookahead(bool drives_idle) const { return !on_ ? 0 : layers_ahead_ > 1 && drives_idle ? layers_ahead_ : 1; }
  int layers_ahead() const { return layers_ahead_; }

  // A request for `asked` (ascending) of `layer` arrives: each distance's last guess at it is
  // scored and forgotten. Returns how many experts of the next-layer guess were asked for, and
  // sets *scored when there was one (recall counts only guessed requests).
  size_t score(int layer, std::span<const int32_t> asked, bool* scored);
  // The request's time and the drives' running idle seconds and busy bandwidth: the period since
  // the previous request, for the idle guesses' allowance (nothing without --prefetch-idle).
  void request_at(std::chrono::steady_clock::time_point now, double drives_idle_seconds, double busy_bandwidth);

  // Keeps a guess (confidence order) at `layer` from `distance` layers before it, for scoring.
  void remember(int layer, int distance, std::span<const int32_t> experts);
  // Whether rank `rank` of the guesses at `layer` from `distance` has earned its read.
  bool earned(int layer, int distance, size_t rank) const;

  // What a guess's reads may spend of the drives' idle time beyond the earned ranks: only
  // next-layer guesses handed over while the drives idle, with --prefetch-idle.
  struct Allowance {
    double window_seconds = 0;  // a read must finish within this
    double bytes = 0;           // what the drives could read in it
    bool affords(double record_bytes) const { return bytes >= record_bytes; }
  };
  Allowance allowance(int distance, bool drives_idle) const;

 private:
  static constexpr size_t kMaxRanks = 64;
  size_t at(int layer, int distance) const { return size_t((distance - 1) * layers_ + layer); }

  int64_t layers_;
  bool on_;
  int layers_ahead_;
  double min_precision_;
  bool idle_guesses_;
  std::vector<std::vector<int32_t>> guesses_;  // [distance - 1][layer]: the last guess, confidence order
  std::vector<double> precision_;              // [distance - 1][layer][rank], kMaxRanks per layer
  DriveSpare spare_;
  std::chrono::steady_clock::time_point last_request_{};
  double idle_at_last_ = 0;
  bool requested_ = false;
};

}  // namespace sluice::store
