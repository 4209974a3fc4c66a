/* scan_intern.h: interning strings into dense local ids (open addressing).
 * Part of scan.c's translation unit (included by it once, in order), not a
 * standalone header. */

/* ---- string interning ------------------------------------------------------------- */

typedef struct {
    const char *s;
    Py_ssize_t len;
    uint64_t h;
    int owned;
} Str;

typedef struct {
    Str *items;
    Py_ssize_t n, cap;
    int32_t *slots;
    Py_ssize_t nslots;
} Interner;

static uint64_t hash_bytes(const char *s, Py_ssize_t len) {
    /* 8 bytes at a time: kernel names are long and every event has one */
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)len;
    Py_ssize_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
        h ^= h >> 32;
    }
    uint64_t w = 0;
    memcpy(&w, s + i, (size_t)(len - i));
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ULL;
    return h ^ (h >> 29);
}

static int interner_grow(Interner *in) {
    Py_ssize_t nslots = in->nslots ? in->nslots * 2 : 1024;
    int32_t *slots = malloc(sizeof(int32_t) * nslots);
    if (!slots) return 0;
    for (Py_ssize_t i = 0; i < nslots; i++) slots[i] = -1;
    for (Py_ssize_t k = 0; k < in->n; k++) {
        Py_ssize_t j = (Py_ssize_t)(in->items[k].h & (uint64_t)(nslots - 1));
        while (slots[j] >= 0) j = (j + 1) & (nslots - 1);
        slots[j] = (int32_t)k;
    }
    free(in->slots);
    in->slots = slots;
    in->nslots = nslots;
    return 1;
}

/* Returns the id of s (taking ownership of it when owned), or -1 on memory error. */
static int32_t intern(Interner *in, const char *s, Py_ssize_t len, int owned) {
    if ((in->n + 1) * 2 > in->nslots && !interner_grow(in)) return -1;
    uint64_t h = hash_bytes(s, len);
    Py_ssize_t j = (Py_ssize_t)(h & (uint64_t)(in->nslots - 1));
    while (in->slots[j] >= 0) {
        Str *it = &in->items[in->slots[j]];
        if (it->h == h && it->len == len && memcmp(it->s, s, len) == 0) {
            if (owned) free((void *)s);
            return in->slots[j];
        }
        j = (j + 1) & (in->nslots - 1);
    }
    if (in->n == in->cap) {
        Py_ssize_t cap = in->cap ? in->cap * 2 : 256;
        Str *items = realloc(in->items, sizeof(Str) * cap);
        if (!items) return -1;
        in->items = items;
        in->cap = cap;
    }
    in->items[in->n] = (Str){s, len, h, owned};
    in->slots[j] = (int32_t)in->n;
    return (int32_t)in->n++;
}

static void interner_free(Interner *in) {
    for (Py_ssize_t k = 0; k < in->n; k++)
        if (in->items[k].owned) free((void *)in->items[k].s);
    free(in->items);
    free(in->slots);
}
