/* SPDX-License-Identifier: MIT */
/*
 * mpsc_ring.pml - the MPSC band ring of src/mpsc_ring.h, one statement per
 * atomic access of the C code: claim (relaxed head load, acquire loads of
 * cons_cache and cons, release refresh of cons_cache, CAS on head),
 * publish (item store, then the position word), peek (position word, then
 * item, per cell, stopping at the first unpublished cell) and consume (one
 * store of cons for the k items used, 1 <= k <= peeked, chosen freely).
 *
 * NPROD producers each enqueue NITEMS items, one at a time, into a ring of
 * CAP cells; a producer that gets -EAGAIN retries once cons has moved, as
 * qps_prio_enqueue_wait() does. One consumer takes all of them.
 *
 * Checked (assertions, ghost state):
 *  - the consumer never reads a cell whose item has not been stored
 *    (written[] lags the position word only if a publish is out of order);
 *  - a producer never stores into a cell still holding an unconsumed item;
 *  - per producer the consumer sees 1, 2, ..., NITEMS in order: no loss,
 *    no duplicate, FIFO;
 *  - at the end head == cons == NPROD * NITEMS, every producer complete;
 *  - invalid end states (a consumer waiting for an item that never comes);
 *  - ltl "all_received": every execution delivers every item.
 *
 * Interleavings are sequentially consistent. The C code's release/acquire
 * pairs are message passing (a flag store after data, a flag load before
 * data), for which SC interleavings are the executions x86-TSO allows.
 *
 * Mutants (spin -DMUT_...), each must fail:
 *  MUT_PUBLISH_FIRST	position word stored before the item
 *  MUT_NO_SPACE_CHECK	claim ignores cons: overwrites unconsumed cells
 *  MUT_PLAIN_CLAIM	head advanced by load + store instead of CAS
 *  MUT_CONSUME_EARLY	consumer stores cons before copying the items
 *
 * Reachability probes (spin -DREACH_...) assert false on a path the
 * properties depend on, so each must fail too:
 *  REACH_FULL		a claim finds the ring full (-EAGAIN)
 *  REACH_REFRESH	a claim refreshes cons_cache from cons
 *  REACH_PARTIAL	the consumer consumes fewer than it peeked
 *  REACH_WRAP		a producer reuses a cell (second lap)
 */
#ifndef NPROD
#define NPROD 2
#endif
#ifndef NITEMS
#define NITEMS 2
#endif
#ifndef CAP
#define CAP 2
#endif
#ifndef BURST
#define BURST CAP
#endif
#define TOTAL (NPROD * NITEMS)

/* qps_mpsc_used(): a head read before a newer cons can trail it. */
#define USED(h, c) ((h) > (c) -> (h) - (c) : 0)
/* An item: producer id * 8 + its sequence number 1..NITEMS. */
#define ITEM(p, k) ((p) * 8 + (k))

byte head;
byte cons_cache;
byte cons;
short cell_seq[CAP];	/* the position word; cell i starts at i - CAP */
byte cell_item[CAP];

/* Ghosts: not part of the algorithm. */
byte written[CAP];	/* position + 1 whose item the cell holds */
byte last[NPROD];	/* per producer: last sequence number consumed */
byte received;
bool finished;

ltl all_received { <> finished }

proctype producer(byte id)
{
	byte k = 1;
	byte h, c, pos;
	bool ok;

	do
	:: k > NITEMS -> break
	:: else ->
		/* qps_mpsc_claim(): relaxed load of head. */
		h = head;
		do
		:: c = cons_cache;			/* acquire */
#ifdef MUT_NO_SPACE_CHECK
		   skip;
#else
		   if
		   :: USED(h, c) + 1 > CAP ->
			c = cons;			/* acquire */
			if
			:: USED(h, c) + 1 > CAP ->
				/* -EAGAIN: wait for the consumer, retry
				 * from a fresh head load. */
#ifdef REACH_FULL
				assert(false);
#endif
				(cons != c);
				h = head;
				goto next_try
			:: else ->
#ifdef REACH_REFRESH
				assert(false);
#endif
				cons_cache = c		/* release */
			fi
		   :: else -> skip
		   fi;
#endif
#ifdef MUT_PLAIN_CLAIM
		   head = h + 1;
		   pos = h;
		   break;
#else
		   /* CAS(head, h, h + 1); on failure h = head. */
		   atomic {
			if
			:: head == h -> head = h + 1; pos = h; ok = true
			:: else -> h = head; ok = false
			fi
		   }
		   if
		   :: ok -> break
		   :: else -> skip
		   fi;
#endif
next_try:	   skip
		od;

		/* qps_mpsc_publish(): item (relaxed), then position word
		 * (release). The assertion is the "no overwrite" check. */
#ifdef MUT_PUBLISH_FIRST
		cell_seq[pos % CAP] = pos;
#endif
		atomic {
			assert(pos < cons + CAP);
			cell_item[pos % CAP] = ITEM(id, k);
			written[pos % CAP] = pos + 1
		}
#ifndef MUT_PUBLISH_FIRST
		cell_seq[pos % CAP] = pos;
#endif
#ifdef REACH_WRAP
		assert(pos < CAP);
#endif
		k++
	od
}

proctype consumer()
{
	byte c, n, i, k, v;
	byte items[BURST];

	do
	:: received == TOTAL -> break
	:: else ->
		c = cons;			/* relaxed: our own index */
		/* Nothing published at the head: a real consumer returns
		 * and is called again; blocking here turns a lost item into
		 * an invalid end state. */
		(cell_seq[c % CAP] == c);
		n = 0;
#ifdef MUT_CONSUME_EARLY
		/* Consume a whole burst before reading it. */
		do
		:: n < BURST && cell_seq[(c + n) % CAP] == c + n -> n++
		:: else -> break
		od;
		cons = c + n;
		i = 0;
		do
		:: i < n ->
			atomic {
				assert(written[(c + i) % CAP] == c + i + 1);
				items[i] = cell_item[(c + i) % CAP]
			}
			i++
		:: else -> break
		od;
		k = n;
#else
		/* qps_mpsc_peek(): per cell, the position word (acquire),
		 * then the item; stop at the first unpublished cell. */
		do
		:: n < BURST && cell_seq[(c + n) % CAP] == c + n ->
			atomic {
				assert(written[(c + n) % CAP] == c + n + 1);
				items[n] = cell_item[(c + n) % CAP]
			}
			n++
		:: else -> break
		od;
		/* The user of the burst takes any 1 <= k <= n (a post that
		 * takes fewer than offered). */
		k = n;
		do
		:: k > 1 -> k--
		:: break
		od;
#ifdef REACH_PARTIAL
		assert(k == n);
#endif
#endif
		/* Ghost: per-producer order of what is consumed. */
		atomic {
			i = 0;
			do
			:: i < k ->
				v = items[i];
				assert(v / 8 < NPROD);
				assert(v % 8 == last[v / 8] + 1);
				last[v / 8] = v % 8;
				received++;
				i++
			:: else -> break
			od
		}
#ifndef MUT_CONSUME_EARLY
		/* qps_mpsc_consume(): release store of cons. */
		cons = c + k
#endif
	od;
	assert(cons == TOTAL && head == TOTAL);
	atomic {
		i = 0;
		do
		:: i < NPROD -> assert(last[i] == NITEMS); i++
		:: else -> break
		od
	}
	finished = true
}

init
{
	byte i;

	atomic {
		i = 0;
		do
		:: i < CAP -> cell_seq[i] = i - CAP; i++
		:: else -> break
		od
	}
	/* Start everything only once the cells are initialised. */
	atomic {
		run consumer();
		i = 0;
		do
		:: i < NPROD -> run producer(i); i++
		:: else -> break
		od
	}
}
