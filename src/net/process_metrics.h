// The process's own resources in Prometheus' standard `process_*` families (open and maximum
// file descriptors, resident and peak resident memory, CPU seconds, threads, start time), read
// from /proc at each scrape. Any thread.
#pragma once

#include "net/prometheus.h"

namespace flashserve::net {

// Sets the families in `registry` from /proc/self; a value that cannot be read is left as it was.
void ExportProcessMetrics(MetricsRegistry& registry);

}  // namespace flashserve::net
