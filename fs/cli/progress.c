/*
 * progress.c - the progress of a long operation (a repack, a blob verified, a download):
 * shown on stderr (a line rewritten in place on a terminal, plain lines otherwise), and
 * recorded in a daemon's status file as "progress: WHAT: DONE TOTAL SECONDS".
 */
#include "cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Operations smaller than this are quick: they show no progress. */
#define PROGRESS_ABOVE (64ull << 20)

void tfsd_view_init(tfsd_progress_view *v, FILE *out)
{
	memset(v, 0, sizeof(*v));
	v->out = out;
	v->tty = isatty(fileno(out)) == 1;
}

/* Ends a progress line left open on a terminal, before other output. */
void tfsd_view_break(tfsd_progress_view *v)
{
	if (v->open) {
		fputc('\n', v->out);
		v->open = false;
	}
}

static void format_secs(char *buf, size_t cap, double s)
{
	if (s < 10)
		snprintf(buf, cap, "%.1f s", s);
	else if (s < 100)
		snprintf(buf, cap, "%.0f s", s);
	else
		snprintf(buf, cap, "%d min %02d s", (int)(s / 60), (int)s % 60);
}

void tfsd_view_show(tfsd_progress_view *v, const char *what, uint64_t done, uint64_t total,
		      double elapsed)
{
	bool end = done >= total;
	if (!end) {
		double since = elapsed - v->last;
		if (v->tty ? since < 0.2
			   : !(since >= 5 || (since >= 1 && done - v->last_done >= total / 10)))
			return;
	}
	v->last = elapsed;
	v->last_done = done;
	double rate = elapsed > 0 ? (double)done / 1e6 / elapsed : 0; /* MB/s */
	char line[512], t[32];
	int pct = total ? (int)(done * 100 / total) : 100;
	if (end) {
		format_secs(t, sizeof(t), elapsed);
		snprintf(line, sizeof(line), "tensorfs: %s: 100%% of %llu MiB in %s, %.0f MB/s", what,
			 (unsigned long long)(total >> 20), t, rate);
	} else {
		if (rate > 0)
			format_secs(t, sizeof(t), (double)(total - done) / 1e6 / rate);
		snprintf(line, sizeof(line), "tensorfs: %s: %d%% of %llu MiB, %.0f MB/s, %s left",
			 what, pct, (unsigned long long)(total >> 20), rate, rate > 0 ? t : "?");
	}
	if (v->tty) {
		/* \033[K clears what a longer line before left on the right */
		fprintf(v->out, "\r%s\033[K%s", line, end ? "\n" : "");
		v->open = !end;
	} else {
		fprintf(v->out, "%s\n", line);
	}
	fflush(v->out);
}

static double seconds_since(const struct timespec *t0)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - t0->tv_sec) + (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
}

void tfsd_sink_init(tfsd_progress_sink *s, tfsd_progress_view *view, FILE *status)
{
	memset(s, 0, sizeof(*s));
	s->view = view;
	s->status = status;
	clock_gettime(CLOCK_MONOTONIC, &s->start);
}

/* The progress callback of codec (tfs_progress_fn); ctx is a tfsd_progress_sink. */
void tfsd_progress_report(void *ctx, const char *what, uint64_t done, uint64_t total)
{
	tfsd_progress_sink *s = ctx;
	if (total < PROGRESS_ABOVE)
		return;
	if (strncmp(s->what, what, sizeof(s->what) - 1) != 0) {
		/* another operation: its own clock */
		if (s->what[0])
			clock_gettime(CLOCK_MONOTONIC, &s->start);
		snprintf(s->what, sizeof(s->what), "%s", what);
		s->last_record = 0;
		if (s->view) {
			tfsd_view_break(s->view);
			s->view->last = 0;
			s->view->last_done = 0;
		}
	}
	double el = seconds_since(&s->start);
	if (s->view)
		tfsd_view_show(s->view, what, done, total, el);
	/* "progress: WHAT: DONE TOTAL SECONDS" (see status_line) */
	if (s->status && (done >= total || el - s->last_record >= 0.2)) {
		s->last_record = el;
		fprintf(s->status, "progress: %s: %llu %llu %.3f\n", what, (unsigned long long)done,
			(unsigned long long)total, el);
		fflush(s->status);
	}
}

/* A line of the result, to stderr and the status file. */
__attribute__((format(printf, 2, 3)))
void tfsd_sink_printf(tfsd_progress_sink *s, const char *fmt, ...)
{
	va_list ap;
	if (s->view)
		tfsd_view_break(s->view);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fflush(stderr);
	if (s->status) {
		va_start(ap, fmt);
		vfprintf(s->status, fmt, ap);
		va_end(ap);
		fflush(s->status);
	}
}
