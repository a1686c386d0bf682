// Small formatting helpers for rates, durations and unit counts.

export function formatNumber(n) {
  if (!Number.isFinite(n)) return '';
  const a = Math.abs(n);
  if (a >= 1e9) return `${(n / 1e9).toFixed(1)}G`;
  if (a >= 1e6) return `${(n / 1e6).toFixed(1)}M`;
  if (a >= 1e4) return `${(n / 1e3).toFixed(1)}k`;
  if (a >= 100 || Number.isInteger(n)) return String(Math.round(n));
  return n.toFixed(a >= 10 ? 1 : 2);
}

export function formatDuration(seconds) {
  if (!Number.isFinite(seconds) || seconds < 0) return '';
  const s = Math.round(seconds);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return s % 60 ? `${m} min ${s % 60} s` : `${m} min`;
  const h = Math.floor(m / 60);
  return m % 60 ? `${h} h ${m % 60} min` : `${h} h`;
}

/** Rate as units per second when the task counts units, else percent per second. A rate above the
 *  whole task a second is not shown: it comes of updates sent milliseconds apart (a burst, a backlog
 *  sent at once), and "749 %/s" tells a reader nothing about how long is left. */
export function formatRate(task) {
  const r = task.rate;
  if (r == null || !Number.isFinite(r) || r <= 0 || r > 1) return '';
  if (task.total > 0 && task.completed != null && !task.timer) return `${formatNumber(r * task.total)}/s`;
  const pct = r * 100;
  return `${pct >= 10 ? pct.toFixed(0) : pct.toFixed(1)} %/s`;
}

export function formatUnits(task) {
  if (task.timer || task.completed == null) return '';
  return task.total != null ? `${formatNumber(task.completed)} / ${formatNumber(task.total)}` : formatNumber(task.completed);
}

/** A running clock: `m:ss`, or `h:mm:ss` from an hour on. */
export function formatClock(seconds) {
  if (!Number.isFinite(seconds) || seconds < 0) return '';
  const s = Math.floor(seconds);
  const pad = (n) => String(n).padStart(2, '0');
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  return h ? `${h}:${pad(m)}:${pad(s % 60)}` : `${m}:${pad(s % 60)}`;
}

/** "12 s ago", "3 min ago", "2 h ago". */
export function formatAgo(seconds) {
  if (!Number.isFinite(seconds)) return '';
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}
