/* scan_fields.h: the fields the scanner reads and where their values go.
 * Part of scan.c's translation unit (included by it once, in order), not a
 * standalone header. */

/* ---- field table ------------------------------------------------------------------ */

enum kind { K_STR, K_SSTR, K_ID, K_INT, K_NUM, K_TS, K_RAW, K_DIMS, K_ARGS, K_DSTR,
            K_DSSTR, K_DUR };

typedef struct {
    const char *key;
    int kind;
    int slot;
} FieldDef;

/* Dense columns (one entry per event): symbols ph, cat, name; pid, tid; ts; dur. */
enum { S_PH, S_CAT, S_NAME, NSYM };
/* Sparse columns (row, value) for fields only some events carry; the order is the one
 * of SPARSE in native.py. Symbols, then ints, then floats, then dims, then raw text. */
enum {
    S_BP, S_S, S_COLL, S_DTYPE, S_PGNAME, S_PGDESC, S_META, S_LABELS,
    I_ID, I_EXT, I_EXTL, I_CORR, I_STREAM, I_DEVICE, I_CBID, I_CID, I_GRAPH, I_SEQNO,
    I_FWD, I_WSTREAM, I_WCORR, I_ADDR, I_DEVTYPE, I_DEVID, I_SORT,
    N_REGS, N_SHMEM, N_BPSM, N_WPSM, N_OCC, N_BYTES, N_SIZE, N_BW, N_INMSG,
    N_OUTMSG, N_GROUP, N_SEQ, N_MEMBYTES, N_TOTALLOC, N_TOTRES,
    D_GRID, D_BLOCK,
    R_PGRANKS, R_DIMS, R_DIMSL, R_ITYPE, R_INSPLIT, R_OUTSPLIT, R_CONCRETE, NSPARSE
};
#define FIRST_RAW R_PGRANKS
#define N_DUR (-1) /* the dense dur column */

static int sparse_width(int slot) {
    if (slot < I_ID) return 4;
    if (slot < D_GRID) return 8;
    if (slot < R_PGRANKS) return 24;
    return 16; /* raw text: offset and length */
}

static const FieldDef TOP[] = {
    {"ph", K_DSSTR, S_PH}, {"cat", K_DSTR, S_CAT}, {"name", K_DSTR, S_NAME},
    {"pid", K_ID, 0}, {"tid", K_ID, 1}, {"ts", K_TS, 0}, {"dur", K_DUR, 0},
    {"id", K_INT, I_ID}, {"bp", K_SSTR, S_BP}, {"s", K_SSTR, S_S}, {"args", K_ARGS, 0},
};
#define NTOP ((int)(sizeof(TOP) / sizeof(TOP[0])))

static const FieldDef ARGS[] = {
    {"External id", K_INT, I_EXT}, {"external id", K_INT, I_EXTL},
    {"correlation", K_INT, I_CORR}, {"stream", K_INT, I_STREAM},
    {"device", K_INT, I_DEVICE}, {"cbid", K_INT, I_CBID}, {"cid", K_INT, I_CID},
    {"graph id", K_INT, I_GRAPH}, {"grid", K_DIMS, D_GRID}, {"block", K_DIMS, D_BLOCK},
    {"registers per thread", K_NUM, N_REGS}, {"shared memory", K_NUM, N_SHMEM},
    {"blocks per SM", K_NUM, N_BPSM}, {"warps per SM", K_NUM, N_WPSM},
    {"est. achieved occupancy %", K_NUM, N_OCC}, {"bytes", K_NUM, N_BYTES},
    {"size", K_NUM, N_SIZE}, {"memory bandwidth (GB/s)", K_NUM, N_BW},
    {"Collective name", K_STR, S_COLL}, {"dtype", K_STR, S_DTYPE},
    {"In msg nelems", K_NUM, N_INMSG}, {"Out msg nelems", K_NUM, N_OUTMSG},
    {"Group size", K_NUM, N_GROUP}, {"Process Group Name", K_STR, S_PGNAME},
    {"Process Group Description", K_STR, S_PGDESC},
    {"Process Group Ranks", K_RAW, R_PGRANKS}, {"Seq", K_NUM, N_SEQ},
    {"Input Dims", K_RAW, R_DIMS}, {"Input dims", K_RAW, R_DIMSL},
    {"Input type", K_RAW, R_ITYPE}, {"Concrete Inputs", K_RAW, R_CONCRETE},
    {"Sequence number", K_INT, I_SEQNO},
    {"In split size", K_RAW, R_INSPLIT}, {"Out split size", K_RAW, R_OUTSPLIT},
    {"Fwd thread id", K_INT, I_FWD}, {"wait_on_stream", K_INT, I_WSTREAM},
    {"wait_on_cuda_event_record_corr_id", K_INT, I_WCORR}, {"Addr", K_INT, I_ADDR},
    {"Bytes", K_NUM, N_MEMBYTES}, {"Total Allocated", K_NUM, N_TOTALLOC},
    {"Total Reserved", K_NUM, N_TOTRES}, {"Device Type", K_INT, I_DEVTYPE},
    {"Device Id", K_INT, I_DEVID}, {"name", K_STR, S_META}, {"labels", K_STR, S_LABELS},
    {"sort_index", K_INT, I_SORT},
};
#define NARGS ((int)(sizeof(ARGS) / sizeof(ARGS[0])))

static size_t TOP_LEN[NTOP];
static size_t ARGS_LEN[NARGS];
