/* scan_lex.h: JSON lexing and typed values, exactly as the Python decoder reads them.
 * Part of scan.c's translation unit (included by it once, in order), not a
 * standalone header. */

/* ---- JSON lexing ------------------------------------------------------------------ */

static inline void ws(Scan *S) {
    while (S->p < S->end &&
           (*S->p == ' ' || *S->p == '\n' || *S->p == '\r' || *S->p == '\t'))
        S->p++;
}

static int hexval(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int read_hex4(const unsigned char *q, const unsigned char *end, unsigned *out) {
    if (end - q < 4) return 0;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(q[i]);
        if (h < 0) return 0;
        v = v * 16 + (unsigned)h;
    }
    *out = v;
    return 1;
}

/* Decode the escapes of a string body [a, b) into a new malloc'd buffer. */
static char *unescape(const unsigned char *a, const unsigned char *b, Py_ssize_t *len) {
    char *out = malloc((size_t)(b - a) + 1);
    if (!out) return NULL;
    Py_ssize_t k = 0;
    while (a < b) {
        if (*a != '\\') {
            out[k++] = (char)*a++;
            continue;
        }
        a++;
        unsigned char c = *a++;
        switch (c) {
        case '"': out[k++] = '"'; break;
        case '\\': out[k++] = '\\'; break;
        case '/': out[k++] = '/'; break;
        case 'b': out[k++] = '\b'; break;
        case 'f': out[k++] = '\f'; break;
        case 'n': out[k++] = '\n'; break;
        case 'r': out[k++] = '\r'; break;
        case 't': out[k++] = '\t'; break;
        case 'u': {
            unsigned cp;
            if (!read_hex4(a, b, &cp)) goto fail;
            a += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned lo;
                if (b - a < 6 || a[0] != '\\' || a[1] != 'u' || !read_hex4(a + 2, b, &lo) ||
                    lo < 0xDC00 || lo > 0xDFFF)
                    goto fail;
                a += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                goto fail;
            }
            if (cp < 0x80) {
                out[k++] = (char)cp;
            } else if (cp < 0x800) {
                out[k++] = (char)(0xC0 | (cp >> 6));
                out[k++] = (char)(0x80 | (cp & 0x3F));
            } else if (cp < 0x10000) {
                out[k++] = (char)(0xE0 | (cp >> 12));
                out[k++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                out[k++] = (char)(0x80 | (cp & 0x3F));
            } else {
                out[k++] = (char)(0xF0 | (cp >> 18));
                out[k++] = (char)(0x80 | ((cp >> 12) & 0x3F));
                out[k++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                out[k++] = (char)(0x80 | (cp & 0x3F));
            }
            break;
        }
        default: goto fail;
        }
    }
    *len = k;
    return out;
fail:
    free(out);
    return NULL;
}

/* Scan a string starting at '"'. Sets body bounds and whether it holds escapes. */
static int lex_string(Scan *S, const unsigned char **a, const unsigned char **b, int *esc) {
    if (S->p >= S->end || *S->p != '"') return 0;
    const unsigned char *q = S->p + 1, *end = S->end;
    int e = 0;
    /* skip 8 plain bytes at a time: no quote, backslash or control character */
    while (end - q >= 8) {
        uint64_t w;
        memcpy(&w, q, 8);
        const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
        uint64_t quote = w ^ (ones * '"'), bslash = w ^ (ones * '\\');
        uint64_t special = ((quote - ones) & ~quote) | ((bslash - ones) & ~bslash) |
                           ((w - ones * 0x20) & ~w);
        if (special & highs) break;
        q += 8;
    }
    while (q < end) {
        unsigned char c = *q;
        if (c == '"') break;
        if (c < 0x20) return 0;
        if (c == '\\') {
            e = 1;
            if (q + 1 >= end) return 0;
            unsigned char d = q[1];
            if (d == 'u') {
                unsigned v;
                if (!read_hex4(q + 2, end, &v)) return 0;
                q += 6;
                continue;
            }
            if (!strchr("\"\\/bfnrt", d) || d == 0) return 0;
            q += 2;
            continue;
        }
        q++;
    }
    if (q >= end) return 0;
    *a = S->p + 1;
    *b = q;
    *esc = e;
    S->p = q + 1;
    return 1;
}

/* A string value interned; returns its local id or -1 (decline). */
static int32_t read_symbol(Scan *S) {
    const unsigned char *a, *b;
    int esc;
    if (!lex_string(S, &a, &b, &esc)) return -1;
    if (!esc) return intern(&S->in, (const char *)a, b - a, 0);
    Py_ssize_t len;
    char *s = unescape(a, b, &len);
    if (!s) return -1;
    return intern(&S->in, s, len, 1);
}

typedef struct {
    const unsigned char *a;
    Py_ssize_t len;
    int is_int;  /* no fraction, no exponent */
    int has_exp;
    int neg;
    Py_ssize_t int_digits;
} Num;

static int lex_number(Scan *S, Num *num) {
    const unsigned char *q = S->p, *end = S->end;
    num->a = q;
    num->neg = 0;
    num->is_int = 1;
    num->has_exp = 0;
    if (q < end && *q == '-') {
        num->neg = 1;
        q++;
    }
    const unsigned char *d0 = q;
    if (q >= end || *q < '0' || *q > '9') return 0;
    if (*q == '0') {
        q++;
    } else {
        while (q < end && *q >= '0' && *q <= '9') q++;
    }
    num->int_digits = q - d0;
    if (q < end && *q == '.') {
        num->is_int = 0;
        q++;
        if (q >= end || *q < '0' || *q > '9') return 0;
        while (q < end && *q >= '0' && *q <= '9') q++;
    }
    if (q < end && (*q == 'e' || *q == 'E')) {
        num->is_int = 0;
        num->has_exp = 1;
        q++;
        if (q < end && (*q == '+' || *q == '-')) q++;
        if (q >= end || *q < '0' || *q > '9') return 0;
        while (q < end && *q >= '0' && *q <= '9') q++;
    }
    num->len = q - num->a;
    S->p = q;
    return 1;
}

static int lex_literal(Scan *S, const char *lit) {
    size_t n = strlen(lit);
    if ((size_t)(S->end - S->p) < n || memcmp(S->p, lit, n) != 0) return 0;
    S->p += n;
    return 1;
}

/* After a member of an object or array: 1 (and past the ',') when another member
 * follows, 2 (and past `close`) when the container ends here, 0 (bad JSON) otherwise. */
static int lex_after_member(Scan *S, unsigned char close) {
    ws(S);
    if (S->p >= S->end) return 0;
    if (*S->p == ',') {
        S->p++;
        return 1;
    }
    if (*S->p == close) {
        S->p++;
        return 2;
    }
    return 0;
}

static int skip_value(Scan *S, int depth) {
    if (depth > 64) return 0;
    ws(S);
    if (S->p >= S->end) return 0;
    unsigned char c = *S->p;
    if (c == '"') {
        const unsigned char *a, *b;
        int esc;
        return lex_string(S, &a, &b, &esc);
    }
    if (c == '{' || c == '[') {
        unsigned char close = c == '{' ? '}' : ']';
        S->p++;
        ws(S);
        if (S->p < S->end && *S->p == close) {
            S->p++;
            return 1;
        }
        for (;;) {
            if (c == '{') {
                const unsigned char *a, *b;
                int esc;
                ws(S);
                if (!lex_string(S, &a, &b, &esc)) return 0;
                ws(S);
                if (S->p >= S->end || *S->p != ':') return 0;
                S->p++;
            }
            if (!skip_value(S, depth + 1)) return 0;
            int next = lex_after_member(S, close);
            if (next != 1) return next == 2;
        }
    }
    if (c == 't') return lex_literal(S, "true");
    if (c == 'f') return lex_literal(S, "false");
    if (c == 'n') return lex_literal(S, "null");
    Num num;
    return lex_number(S, &num);
}

/* An integer token within +-INT64_MAX. */
static int num_to_int(const Num *num, int64_t *out) {
    if (!num->is_int) return 0;
    const unsigned char *q = num->a + num->neg;
    uint64_t v = 0;
    for (Py_ssize_t i = 0; i < num->int_digits; i++) {
        unsigned d = q[i] - '0';
        if (v > (uint64_t)(INT64_MAX - d) / 10) return 0;
        v = v * 10 + d;
    }
    *out = num->neg ? -(int64_t)v : (int64_t)v;
    return 1;
}

/* IntLike: an integer or null (-1); anything else declines. */
static int read_int(Scan *S, int64_t *out) {
    if (S->p < S->end && *S->p == 'n') {
        *out = -1;
        return lex_literal(S, "null");
    }
    Num num;
    return lex_number(S, &num) && num_to_int(&num, out);
}

/* NumLike: a number or null (NaN). */
static int read_num(Scan *S, double *out) {
    if (S->p < S->end && *S->p == 'n') {
        *out = NAN;
        return lex_literal(S, "null");
    }
    Num num;
    if (!lex_number(S, &num)) return 0;
    int64_t iv;
    if (num.is_int && num.int_digits <= 15 && num_to_int(&num, &iv)) {
        *out = (double)iv;
        return 1;
    }
    char buf[64];
    if (num.len >= (Py_ssize_t)sizeof(buf)) return 0;
    memcpy(buf, num.a, (size_t)num.len);
    buf[num.len] = 0;
    char *endp;
    *out = strtod(buf, &endp);
    return endp == buf + num.len;
}

/* ts: microseconds as a decimal, to exact integer nanoseconds (see timeparse.py). */
static int read_ts(Scan *S, int64_t *out) {
    Num num;
    if (S->p >= S->end || *S->p == 'n' || !lex_number(S, &num) || num.has_exp) return 0;
    /* below 2**52 us the float64 route of timeparse.py is exact too: same result */
    if (num.int_digits > 16) return 0;
    const unsigned char *q = num.a + num.neg;
    int64_t us = 0;
    for (Py_ssize_t i = 0; i < num.int_digits; i++) us = us * 10 + (q[i] - '0');
    if (us >= (1LL << 52)) return 0;
    int64_t frac = 0;
    if (!num.is_int) {
        const unsigned char *f = q + num.int_digits + 1;
        const unsigned char *fend = num.a + num.len;
        int scale = 100;
        for (; f < fend && scale > 0; f++, scale /= 10) frac += (int64_t)(*f - '0') * scale;
    }
    int64_t ns = us * 1000 + frac;
    *out = num.neg ? -ns : ns;
    return 1;
}

/* grid/block: an array of integers (first three kept, -1 padded) or a string. */
static int read_dims(Scan *S, int64_t *out) {
    out[0] = out[1] = out[2] = -1;
    if (S->p < S->end && *S->p == '"') {
        const unsigned char *a, *b;
        int esc;
        return lex_string(S, &a, &b, &esc);
    }
    if (S->p >= S->end || *S->p != '[') return 0;
    S->p++;
    ws(S);
    if (S->p < S->end && *S->p == ']') {
        S->p++;
        return 1;
    }
    for (int k = 0;; k++) {
        ws(S);
        Num num;
        int64_t v;
        if (!lex_number(S, &num) || !num_to_int(&num, &v)) return 0;
        if (k < 3) out[k] = v;
        int next = lex_after_member(S, ']');
        if (next != 1) return next == 2;
    }
}
