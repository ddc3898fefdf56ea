#include "http.h"

#include <string.h>
#include <strings.h>

#include "memcache.h"

/* Length of the header block (through the blank line), or 0 if it is not complete yet.
 * Bare LF line endings are accepted as well as CRLF. */
static size_t header_block_len(const char *buf, size_t len)
{
	const char *p = buf, *end = buf + len;

	while ((p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
		p++;
		if (p < end && *p == '\n')
			return (size_t)(p + 1 - buf);
		if (end - p >= 2 && p[0] == '\r' && p[1] == '\n')
			return (size_t)(p + 2 - buf);
	}
	return 0;
}

/* Parse a decimal in [0, max]; rejects empty, signs, junk and overflow. */
static bool parse_uint(const char *s, size_t n, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (n == 0 || n > 20)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		if (v > (UINT64_MAX - 9) / 10)
			return false;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v > max)
		return false;
	*out = v;
	return true;
}

static bool has_prefix(const char *s, size_t n, const char *prefix, size_t *plen)
{
	*plen = strlen(prefix);
	return n >= *plen && memcmp(s, prefix, *plen) == 0;
}

/* Route the target; false means "400" (a number out of range). */
static bool route(const char *t, size_t n, struct rs_request *req)
{
	size_t pl;
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)t[i]) * 16777619u;
	req->class_hash = h;
	req->kind = RS_REQ_NOT_FOUND;
	req->arg = 0;
	if (n == 5 && memcmp(t, "/null", 5) == 0) {
		req->kind = RS_REQ_NULL;
	} else if (has_prefix(t, n, "/fanout/", &pl)) {
		const char *f = t + pl, *slash = memchr(f, '/', n - pl);
		unsigned size;

		if (!slash)
			return true; /* unknown path */
		if (!parse_uint(f, (size_t)(slash - f), MC_MAX_FANOUT, &req->arg) || req->arg == 0 ||
		    !mc_size_class(slash + 1, (size_t)(t + n - slash - 1), &size))
			return false;
		req->size = size;
		req->kind = RS_REQ_FANOUT;
	} else if (has_prefix(t, n, "/file/", &pl)) {
		size_t nlen = n - pl;
		bool ok = nlen > 0 && nlen < sizeof req->name && t[pl] != '.';

		for (size_t i = 0; ok && i < nlen; i++) {
			char ch = t[pl + i];
			ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
			     ch == '.' || ch == '_' || ch == '-';
		}
		if (ok) { /* any other name: just an unknown path (404) */
			memcpy(req->name, t + pl, nlen);
			req->name[nlen] = '\0';
			req->kind = RS_REQ_FILE;
		}
	} else if (has_prefix(t, n, "/bytes/", &pl) || has_prefix(t, n, "/compute/", &pl)) {
		bool bytes = t[1] == 'b';
		const char *num = t + pl;
		size_t nlen = n - pl;

		for (size_t i = 0; i < nlen; i++)
			if (num[i] < '0' || num[i] > '9')
				return true; /* not a number: just an unknown path */
		if (!parse_uint(num, nlen, bytes ? RS_MAX_BODY : RS_MAX_COMPUTE, &req->arg))
			return false;
		req->kind = bytes ? RS_REQ_BYTES : RS_REQ_COMPUTE;
	}
	return true;
}

/* Case-insensitive search for a comma-separated token in a header value. */
static bool value_has_token(const char *v, size_t n, const char *token)
{
	size_t tl = strlen(token);

	while (n > 0) {
		while (n > 0 && (*v == ' ' || *v == '\t' || *v == ',')) {
			v++;
			n--;
		}
		size_t w = 0;
		while (w < n && v[w] != ',')
			w++;
		size_t t = w;
		while (t > 0 && (v[t - 1] == ' ' || v[t - 1] == '\t'))
			t--;
		if (t == tl && strncasecmp(v, token, tl) == 0)
			return true;
		v += w;
		n -= w;
	}
	return false;
}

enum rs_parse http_parse(const char *buf, size_t len, struct rs_request *req, size_t *consumed)
{
	size_t hlen = header_block_len(buf, len < RS_MAX_HEADER ? len : RS_MAX_HEADER);
	const char *p = buf, *end, *sp1, *sp2, *eol;
	bool conn_close = false, conn_keep = false;

	if (hlen == 0)
		return len >= RS_MAX_HEADER ? RS_PARSE_BAD : RS_PARSE_INCOMPLETE;
	end = buf + hlen;

	/* Nothing but visible ASCII, SP, HTAB, CR, LF anywhere in the header block. */
	for (const char *q = buf; q < end; q++) {
		unsigned char ch = (unsigned char)*q;
		if ((ch < 0x20 && ch != '\t' && ch != '\r' && ch != '\n') || ch == 0x7f)
			return RS_PARSE_BAD;
	}

	/* Request line: METHOD SP TARGET SP HTTP/1.x */
	eol = memchr(p, '\n', (size_t)(end - p));
	size_t llen = (size_t)(eol - p) - (eol > p && eol[-1] == '\r');
	sp1 = memchr(p, ' ', llen);
	if (!sp1 || sp1 == p)
		return RS_PARSE_BAD;
	sp2 = memchr(sp1 + 1, ' ', llen - (size_t)(sp1 + 1 - p));
	if (!sp2 || sp2 == sp1 + 1 || sp1[1] != '/')
		return RS_PARSE_BAD;
	size_t vlen = llen - (size_t)(sp2 + 1 - p);
	if (vlen != 8 || memcmp(sp2 + 1, "HTTP/1.", 7) != 0 || (sp2[8] != '0' && sp2[8] != '1'))
		return RS_PARSE_BAD;
	req->http10 = sp2[8] == '0';
	bool is_get = sp1 - p == 3 && memcmp(p, "GET", 3) == 0;
	if (!route(sp1 + 1, (size_t)(sp2 - sp1 - 1), req))
		return RS_PARSE_BAD;
	if (!is_get)
		req->kind = RS_REQ_BAD_METHOD;

	/* Header fields: only Connection matters; anything announcing a body is refused
	 * (these servers have no use for one and must not misread it as the next request). */
	for (p = eol + 1; p < end; p = eol + 1) {
		eol = memchr(p, '\n', (size_t)(end - p));
		size_t n = (size_t)(eol - p) - (eol > p && eol[-1] == '\r');
		if (n == 0)
			break; /* the blank line */
		const char *colon = memchr(p, ':', n);
		if (!colon || colon == p)
			return RS_PARSE_BAD;
		for (const char *q = p; q < colon; q++)
			if (*q == ' ' || *q == '\t')
				return RS_PARSE_BAD;
		size_t nlen = (size_t)(colon - p);
		const char *v = colon + 1;
		size_t vl = n - nlen - 1;
		if (nlen == 10 && strncasecmp(p, "Connection", 10) == 0) {
			conn_close |= value_has_token(v, vl, "close");
			conn_keep |= value_has_token(v, vl, "keep-alive");
		} else if (nlen == 14 && strncasecmp(p, "Content-Length", 14) == 0) {
			uint64_t cl;
			while (vl > 0 && (*v == ' ' || *v == '\t')) {
				v++;
				vl--;
			}
			while (vl > 0 && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
				vl--;
			if (!parse_uint(v, vl, 0, &cl))
				return RS_PARSE_BAD;
		} else if (nlen == 17 && strncasecmp(p, "Transfer-Encoding", 17) == 0) {
			return RS_PARSE_BAD;
		}
	}
	req->keep_alive = req->http10 ? (conn_keep && !conn_close) : !conn_close;
	if (req->kind == RS_REQ_BAD_METHOD)
		req->keep_alive = false;
	*consumed = hlen;
	return RS_PARSE_OK;
}

void http_fill_body(char *dst, size_t n)
{
	static const char alphabet[26] = "abcdefghijklmnopqrstuvwxyz";
	size_t done = n < sizeof alphabet ? n : sizeof alphabet;

	memcpy(dst, alphabet, done);
	/* Doubling copies: 'done' stays a multiple of 26, so the pattern continues seamlessly. */
	while (done < n) {
		size_t chunk = done < n - done ? done : n - done;
		memcpy(dst + done, dst, chunk);
		done += chunk;
	}
}

uint64_t http_compute(uint64_t units)
{
	uint64_t x = 0x9e3779b97f4a7c15ull;

	for (uint64_t u = 0; u < units; u++)
		for (int i = 0; i < 1000; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
		}
	return x;
}
