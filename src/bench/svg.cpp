// SVG chart writer: axes with nice ticks, one colour per series, a legend, escaped text.
#include "bench/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "core/durable_file.h"
#include "format/safetensors.h"

namespace sluice::bench {
namespace {

const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"};

std::string esc(const std::string& s) {
  std::string o;
  for (char ch : s) {
    switch (ch) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      default: o += ch;
    }
  }
  return o;
}

std::string fmt(double v) {
  char buf[32];
  double a = std::fabs(v);
  if (a != 0 && (a >= 1e6 || a < 1e-3))
    std::snprintf(buf, sizeof buf, "%.3g", v);
  else
    std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// Bar labels: three significant digits are what a reader compares.
std::string short_fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

struct Frame {
  double left = 70, right = 160, top = 40, bottom = 55;
  double w, h, x0, x1, y0, y1;
  double px(double x) const { return left + (x1 > x0 ? (x - x0) / (x1 - x0) : 0.5) * (w - left - right); }
  double py(double y) const { return h - bottom - (y1 > y0 ? (y - y0) / (y1 - y0) : 0) * (h - top - bottom); }
};

void header(std::ostringstream& o, const Chart& c) {
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << c.width << "\" height=\"" << c.height
    << "\" viewBox=\"0 0 " << c.width << ' ' << c.height << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << c.width / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" << esc(c.title)
    << "</text>\n";
}

void y_axis(std::ostringstream& o, const Frame& f, const Chart& c, const std::vector<double>& ticks) {
  for (double t : ticks) {
    double y = f.py(t);
    o << "<line x1=\"" << f.left << "\" x2=\"" << f.w - f.right << "\" y1=\"" << y << "\" y2=\"" << y
      << "\" stroke=\"#ddd\"/>\n<text x=\"" << f.left - 6 << "\" y=\"" << y + 4 << "\" text-anchor=\"end\">"
      << fmt(t) << "</text>\n";
  }
  o << "<line x1=\"" << f.left << "\" x2=\"" << f.left << "\" y1=\"" << f.top << "\" y2=\"" << f.h - f.bottom
    << "\" stroke=\"black\"/>\n<line x1=\"" << f.left << "\" x2=\"" << f.w - f.right << "\" y1=\""
    << f.h - f.bottom << "\" y2=\"" << f.h - f.bottom << "\" stroke=\"black\"/>\n"
    << "<text transform=\"translate(16," << (f.top + f.h - f.bottom) / 2 << ") rotate(-90)\" text-anchor=\"middle\">"
    << esc(c.y_label) << "</text>\n<text x=\"" << (f.left + f.w - f.right) / 2 << "\" y=\"" << f.h - 12
    << "\" text-anchor=\"middle\">" << esc(c.x_label) << "</text>\n";
  if (c.reference > 0 && c.reference <= f.y1) {
    double y = f.py(c.reference);
    o << "<line x1=\"" << f.left << "\" x2=\"" << f.w - f.right << "\" y1=\"" << y << "\" y2=\"" << y
      << "\" stroke=\"black\" stroke-dasharray=\"6,4\"/>\n<text x=\"" << f.w - f.right + 4 << "\" y=\"" << y + 4
      << "\" font-size=\"11\">" << esc(c.reference_label) << "</text>\n";
  }
}

void legend(std::ostringstream& o, const Frame& f, const Chart& c) {
  double y = f.top + 10;
  for (size_t i = 0; i < c.series.size(); ++i, y += 18) {
    o << "<rect x=\"" << f.w - f.right + 10 << "\" y=\"" << y - 9 << "\" width=\"12\" height=\"12\" fill=\""
      << kColours[i % 8] << "\"/>\n<text x=\"" << f.w - f.right + 27 << "\" y=\"" << y + 1 << "\">"
      << esc(c.series[i].name) << "</text>\n";
  }
}

double finite_max(const std::vector<double>& v, double start) {
  for (double x : v)
    if (std::isfinite(x)) start = std::max(start, x);
  return start;
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int count) {
  std::vector<double> out;
  if (!std::isfinite(lo) || !std::isfinite(hi) || count < 1) return out;
  if (hi <= lo) hi = lo + 1;
  double raw = (hi - lo) / count;
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  for (double t = std::floor(lo / step) * step; t <= hi + step * 1e-9; t += step) out.push_back(std::fabs(t) < step * 1e-9 ? 0 : t);
  if (!out.empty() && out.back() < hi) out.push_back(out.back() + step);
  return out;
}

std::string line_chart_svg(const Chart& c) {
  Frame f;
  f.w = c.width;
  f.h = c.height;
  double xmin = INFINITY, xmax = -INFINITY, ymax = c.reference;
  for (const auto& s : c.series) {
    for (double x : s.x)
      if (std::isfinite(x)) xmin = std::min(xmin, x), xmax = std::max(xmax, x);
    ymax = finite_max(s.y, ymax);
  }
  if (!std::isfinite(xmin)) xmin = 0, xmax = 1;
  auto yt = nice_ticks(0, ymax > 0 ? ymax : 1, 5);
  auto xt = nice_ticks(xmin, xmax, 6);
  f.x0 = xt.front();
  f.x1 = xt.back();
  f.y0 = 0;
  f.y1 = yt.back();
  std::ostringstream o;
  header(o, c);
  y_axis(o, f, c, yt);
  for (double t : xt)
    o << "<text x=\"" << f.px(t) << "\" y=\"" << f.h - f.bottom + 16 << "\" text-anchor=\"middle\">" << fmt(t)
      << "</text>\n";
  for (size_t i = 0; i < c.series.size(); ++i) {
    const auto& s = c.series[i];
    o << "<polyline fill=\"none\" stroke-width=\"2\" stroke=\"" << kColours[i % 8] << "\" points=\"";
    for (size_t k = 0; k < s.x.size() && k < s.y.size(); ++k)
      if (std::isfinite(s.x[k]) && std::isfinite(s.y[k])) o << f.px(s.x[k]) << ',' << f.py(s.y[k]) << ' ';
    o << "\"/>\n";
    if (s.x.size() <= 24)
      for (size_t k = 0; k < s.x.size() && k < s.y.size(); ++k)
        if (std::isfinite(s.x[k]) && std::isfinite(s.y[k]))
          o << "<circle cx=\"" << f.px(s.x[k]) << "\" cy=\"" << f.py(s.y[k]) << "\" r=\"3\" fill=\""
            << kColours[i % 8] << "\"/>\n";
  }
  legend(o, f, c);
  o << "</svg>\n";
  return o.str();
}

std::string bar_chart_svg(const Chart& c) {
  Frame f;
  f.w = c.width;
  f.h = c.height;
  double ymax = c.reference;
  for (const auto& s : c.series) ymax = finite_max(s.y, ymax);
  auto yt = nice_ticks(0, ymax > 0 ? ymax : 1, 5);
  f.x0 = 0;
  f.x1 = double(std::max<size_t>(c.categories.size(), 1));
  f.y0 = 0;
  f.y1 = yt.back();
  std::ostringstream o;
  header(o, c);
  y_axis(o, f, c, yt);
  size_t ns = std::max<size_t>(c.series.size(), 1);
  double group = f.px(1) - f.px(0);
  double bar = group * 0.8 / double(ns);
  for (size_t k = 0; k < c.categories.size(); ++k) {
    o << "<text x=\"" << f.px(double(k) + 0.5) << "\" y=\"" << f.h - f.bottom + 16 << "\" text-anchor=\"middle\">"
      << esc(c.categories[k]) << "</text>\n";
    for (size_t i = 0; i < c.series.size(); ++i) {
      if (k >= c.series[i].y.size() || !std::isfinite(c.series[i].y[k])) continue;
      double v = c.series[i].y[k];
      double x = f.px(double(k)) + group * 0.1 + bar * double(i);
      o << "<rect x=\"" << x << "\" y=\"" << f.py(v) << "\" width=\"" << bar * 0.95 << "\" height=\""
        << f.py(0) - f.py(v) << "\" fill=\"" << kColours[i % 8] << "\"/>\n<text x=\"" << x + bar * 0.475
        << "\" y=\"" << f.py(v) - 4 << "\" text-anchor=\"middle\" font-size=\"10\">" << short_fmt(v) << "</text>\n";
    }
  }
  legend(o, f, c);
  o << "</svg>\n";
  return o.str();
}

std::string write_chart(const std::string& path, const std::string& svg) {
  write_file_durably(path, svg);
  std::string png = path.substr(0, path.size() - (path.size() > 4 && path.ends_with(".svg") ? 4 : 0)) + ".png";
  auto quote = [](const std::string& s) {
    std::string q = "'";
    for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    return q + "'";
  };
  const std::string tmp = png + ".tmp.png";
  std::string cmd;
  if (std::system("command -v rsvg-convert >/dev/null 2>&1") == 0)
    cmd = "rsvg-convert -o " + quote(tmp) + " " + quote(path);
  else if (std::system("command -v convert >/dev/null 2>&1") == 0)
    cmd = "convert " + quote(path) + " " + quote(tmp);
  else
    return "";
  if (std::system((cmd + " >/dev/null 2>&1").c_str()) != 0 || std::rename(tmp.c_str(), png.c_str()) != 0) {
    std::remove(tmp.c_str());
    return "";
  }
  return png;
}

}  // namespace sluice::bench
