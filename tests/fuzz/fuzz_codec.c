/*
 * fuzz_codec.c - libFuzzer target: the element codec table (codec.c),
 * every row, on hostile bytes and hostile sizes.
 *
 * Input: a byte choosing the row (two values past the table's end too),
 * 8 bytes of a claimed element count, 8 of a first element, 2 of a count
 * to decode, then the tensor's bytes.  The tensor goes through the
 * checked entry points with the claimed sizes (cg_tensor_decode,
 * _decode_f64, _get_u64, _to_f32), which must refuse what its bytes do
 * not hold; then, with the count its bytes do hold, through the row's own
 * functions: check, decode, to_u64, and the encoders on what was decoded
 * (nan, inf and values out of range among them).
 */
#include "fuzz.h"

#define MAXN 512 /* elements decoded */
#define ENC 64   /* elements encoded */

static uint64_t
le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static float out[MAXN], back[MAXN];
	static double out64[MAXN];
	static uint64_t outu[MAXN];
	static unsigned char enc[MAXN * 8];
	struct cg_tensor t = {.name = "fuzz", .ndim = 1};
	const struct cg_codec *c;
	struct cg_rng r;
	uint64_t first;
	size_t n, len, whole;

	if (size < 19)
		return 0;
	t.dtype = (enum cg_dtype)(data[0] % (CG_NDTYPES + 2));
	t.nelem = t.shape[0] = le64(data + 1);
	first = le64(data + 9);
	n = ((size_t)data[17] | (size_t)data[18] << 8) % (MAXN + 1);
	data += 19;
	size -= 19;
	/* the tensor's bytes in memory of their own, as a reader's are,
	 * so that a read past them is the sanitizer's to see */
	len = size < MAXN * 8 ? size : MAXN * 8;
	t.nbytes = len;
	if ((t.data = malloc(len ? len : 1)) == NULL)
		abort();
	memcpy(t.data, data, len);

	(void)cg_tensor_decode(&t, first, n, out);
	(void)cg_tensor_decode_f64(&t, first, n, out64);
	(void)cg_tensor_get_u64(&t, first, n, outu);
	if (t.nelem <= MAXN)
		(void)cg_tensor_to_f32(&t, out);
	if ((c = cg_codec(t.dtype)) == NULL)
		goto out;

	/* the row itself, on as many whole blocks as the bytes hold */
	whole = len / c->bytes * c->block;
	if (whole > MAXN)
		whole = MAXN / c->block * c->block;
	t.nelem = t.shape[0] = whole;
	t.nbytes = whole / c->block * c->bytes;
	if (c->check && c->check(t.data, whole) != 0)
		goto out;
	c->decode(out, t.data, whole);
	if (c->to_u64)
		c->to_u64(outu, t.data, whole);
	(void)cg_tensor_decode(&t, first % (whole + 1),
	                       (size_t)(whole - first % (whole + 1)), out);
	/* the encoders on the first few blocks only: encode_fit's search
	 * costs far more than a decode, and more blocks find nothing new */
	if (whole > ENC)
		whole = ENC / c->block * c->block;
	if (c->encode(enc, out, whole) == 0)
		c->decode(back, enc, whole);
	cg_rng_seed(&r, first);
	if (c->encode_sr && c->encode_sr(enc, out, whole, &r) == 0)
		c->decode(back, enc, whole);
	if (c->encode_fit && c->encode_fit(enc, out, whole) == 0)
		c->decode(back, enc, whole);
out:
	free(t.data);
	return 0;
}
