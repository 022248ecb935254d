/* SPDX-License-Identifier: MIT */
/*
 * prio_owner.pml - the single-transmitter hand-off of src/prio_bands.[ch]
 * (docs/prio_queues.md, "The transmitter"): the owner word (0, OWNER,
 * OWNER|MISSED), the lone sender's bypass and its release, the owner's
 * drain / linger / backlog / release-or-redrain loop, the producers' flag
 * (take the word or set MISSED) and the path that skips the flag write
 * when MISSED is already set, and qps_prio_kick() from a completion
 * reaper. Also the send queue's mutex (sq->lock, lk here), under which
 * every post to the device is made: the owner's posts (the post callback)
 * and the lone sender's bypass; and the locked bypass of a sender that
 * holds that mutex (qps_prio_bypass_locked(), tx.c qps_tx_one()): it
 * posts its item under the mutex without taking the word, when the word
 * reads 0 and backlog is clear, and otherwise unlocks and sends the item
 * the usual way.
 *
 * NPROD producers each send NITEMS items through qps_prio_enqueue()
 * (a full band returns -EAGAIN and counts a drop, as for a non-blocking
 * endpoint). One band; its ring is mpsc_ring.pml's with the claim taken as
 * one atomic step (that model checks the claim at CAS granularity). The
 * post callback takes all it is offered, except that up to MAXSTALL times
 * it takes fewer (QP full); each such stall lets the reaper call
 * qps_prio_kick() once, as completion reaping does. Each item first
 * tries the locked bypass or not, nondeterministically (a sender may not
 * hold the mutex for it, e.g. a fragmented datagram).
 *
 * Memory model. The owner word is only touched by seq_cst RMWs and
 * seq_cst loads, which x86 and the C11 single total order make
 * sequentially consistent. What SC would hide is the store buffer: a
 * producer's publish (a release store, a plain mov on x86) may become
 * visible after the producer's later load of the owner word. The model
 * gives every producer a one-entry store buffer: its publish is buffered
 * and drains nondeterministically, at the latest before its next locked
 * RMW or at its end (after it returned). A seq_cst publish (xchg or
 * mov + mfence on x86) drains at once; that is what the skip path relies
 * on. Taking the mutex is a locked RMW too, so it drains the buffer. The
 * owner's own buffered stores (cons, backlog, counters) are read only by
 * later owners, after its release RMW drained them, and backlog also by
 * a locked bypass after its acquire load read that release's 0, so they
 * are modelled SC; producers reading a stale cons only see the band
 * fuller (more drops), never emptier.
 *
 * Checked:
 *  - at most one owner at a time, and only the owner drains or posts from
 *    the band;
 *  - every post is made holding the mutex;
 *  - no item posted twice;
 *  - no send overtakes its producer's previous one: a bypass, with the
 *    word or locked, finds none of its own producer's items still queued
 *    (qps_prio_backlog(), and the word left nonzero until a drain passed
 *    them); with -DORDER_ALL, none of any producer's sends that returned
 *    before the bypassing send began (at NPROD 3, NITEMS 1 the
 *    per-producer check is empty);
 *  - no stranded item: once every producer and the reaper are done,
 *    posted (owners) + lposted (locked bypasses) + dropped ==
 *    NPROD * NITEMS, the band is empty, the word is 0, the mutex free;
 *  - invalid end states, and ltl "drained": every execution gets there.
 *
 * Mutants (spin -DMUT_...), each must fail:
 *  MUT_NO_MISSED_RECHECK	release stores 0 without looking for MISSED
 *  MUT_SKIP_RELEASE_PUBLISH	the skip path publishes with release, not
 *				seq_cst (the store-buffer race)
 *  MUT_PLAIN_FLAG		flag by load + store instead of CAS
 *  MUT_PLAIN_TAKE		bypass takes the word by load + store
 *  MUT_RELAXED_BACKLOG	the backlog look reads the ring's head relaxed,
 *				so it may see a value older than a claim
 *				that precedes it in the seq_cst order (a
 *				producer that skipped the flag write)
 *  MUT_LOCKED_NO_STATE	the locked bypass ignores the owner word and
 *				looks only at backlog
 *  MUT_LOCKED_NO_BACKLOG	the locked bypass ignores backlog
 *
 * Reachability probes (spin -DREACH_...) assert false on a path the
 * properties depend on, so each must fail too; a probe that passed would
 * mean the bounds never exercise that path:
 *  REACH_SKIP		a producer skips the flag write (MISSED seen set)
 *  REACH_REDRAIN		an owner's release finds MISSED and drains again
 *  REACH_KICK_RUN		a kick after a stall takes the word and drains
 *  REACH_BYPASS		a lone sender posts directly
 *  REACH_LINGER_HIT	a lingering owner finds an item and drains again
 *  REACH_LOCKED_BYPASS	a sender holding the mutex posts directly
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
#define BURST 2
#endif
#ifndef MAXSTALL
#define MAXSTALL 1
#endif
#define TOTAL (NPROD * NITEMS)
#define OWNER 1
#define MISSED 2
#define NONE 255

#define USED(h, c) ((h) > (c) -> (h) - (c) : 0)

byte state;			/* the owner word */
byte head;			/* band ring: claim index */
byte cons;			/* band ring: consumer index */
short cell_seq[CAP];		/* position words, as other CPUs see them */
bool backlog;
byte whose[TOTAL];		/* ghost: pid that claimed each position */
byte pend[NPROD + 2];		/* ghost: a pid's items queued, not posted */

/* Ghosts. */
byte owner = NONE;		/* pid of the current owner */
byte nowners;
bool done[TOTAL];		/* ring position already posted */
byte posted;			/* from the ring and by bypass */
byte lposted;			/* by locked bypass (qps_prio_bypass_locked()) */
byte lk = NONE;			/* pid holding sq->lock, the post's mutex */
byte dropped;
byte stalls;
byte kicks;
bool reaper_busy;
byte returned;			/* producers that have returned */
bool finished;
#ifdef ORDER_ALL
#if NPROD > 6
#error "ORDER_ALL keeps one bit per pid in a byte"
#endif
bool retd[TOTAL];		/* the position's send has returned */
byte before[TOTAL];		/* bit p: p's send began after that */
#endif

ltl drained { <> finished }

/* The word was taken by the calling process. */
inline become_owner()
{
	assert(nowners == 0 && owner == NONE);
	nowners++;
	owner = _pid
}

/* The word is given up (in the same atomic step as the store of 0). */
inline leave_owner()
{
	assert(nowners == 1 && owner == _pid);
	nowners--;
	owner = NONE
}

/*
 * ORDER_ALL: a bypass must not overtake an item of any producer's send
 * that returned before the bypassing send began (the kernel's bypass
 * rule), not only of its own producer's. Cleared when posted, so that
 * what is already posted does not tell states apart.
 */
inline send_begin()
{
#ifdef ORDER_ALL
	j = 0;
	do
	:: j < TOTAL ->
		if
		:: retd[j] && !done[j] -> before[j] = before[j] | (1 << _pid)
		:: else -> skip
		fi;
		j++
	:: else -> break
	od;
	j = 0
#else
	skip
#endif
}

inline send_end()
{
	atomic {
		if
		:: q && !done[pos] -> retd[pos] = true
		:: else -> skip
		fi;
		q = false
	}
}

/* Inside a bypass's post. */
inline no_overtake()
{
	assert(pend[_pid] == 0);
#ifdef ORDER_ALL
	j = 0;
	do
	:: j < TOTAL -> assert(done[j] || !(before[j] & (1 << _pid))); j++
	:: else -> break
	od;
	j = 0
#endif
}

/* The store buffer drains (a locked instruction, an mfence, or later). */
inline sb_flush()
{
	atomic {
		if
		:: sb != NONE -> cell_seq[sb % CAP] = sb; sb = NONE
		:: else -> skip
		fi
	}
}

/* sq->lock: every post to the device is made under it. Taking it is a
 * locked RMW, which drains the taker's store buffer. */
inline lock()
{
	sb_flush();
	atomic { lk == NONE -> lk = _pid }
}

inline unlock()
{
	assert(lk == _pid);
	lk = NONE
}

/* qps_prio_drain(): peek (per cell, stop at an unpublished one), post,
 * consume what the post took, until the band is empty or a post stalls. */
inline drain()
{
	stopped = false;
	do
	:: c = cons;
	   n = 0;
	   do
	   :: n < BURST && cell_seq[(c + n) % CAP] == c + n -> n++
	   :: else -> break
	   od;
	   if
	   :: n == 0 -> break
	   :: else ->
		k = n;
		if
		:: stalls < MAXSTALL -> do :: k > 0 -> k-- :: break od
		:: else -> skip
		fi;
		/* The post callback (qps_tx_prio_post) takes the lock. */
		lock();
		atomic {
			assert(lk == _pid);
			assert(owner == _pid);
			i = 0;
			do
			:: i < k ->
				assert(!done[c + i]);
				done[c + i] = true;
				pend[whose[c + i]]--;
#ifdef ORDER_ALL
				retd[c + i] = false;
				before[c + i] = 0;
#endif
				posted++;
				i++
			:: else -> break
			od
		}
		unlock();
		cons = c + k;
		if
		:: k < n -> stalls++; stopped = true; break
		:: else -> skip
		fi
	   fi
	od
}

/* qps_prio_backlog(): more than one claimed cell, or one that is
 * published. */
inline compute_backlog()
{
	h = head;
#ifdef MUT_RELAXED_BACKLOG
	do
	:: h > cons -> h--
	:: break
	od;
#endif
	c = cons;
	n = USED(h, c);
	if
	:: n > 1 -> backlog = true
	:: n == 1 && cell_seq[c % CAP] == c -> backlog = true
	:: else -> backlog = false
	fi
}

/* qps_prio_release(): CAS(OWNER -> 0); if MISSED was set, exchange the
 * word back to OWNER and report that the caller must drain again. */
inline release()
{
#ifdef MUT_NO_MISSED_RECHECK
	atomic { leave_owner(); state = 0; ok = true }
#else
	atomic {
		if
		:: state == OWNER -> leave_owner(); state = 0; ok = true
		:: else -> ok = false
		fi
	}
	if
	:: !ok ->
#ifdef REACH_REDRAIN
		assert(false);
#endif
		state = OWNER		/* exchange: clears MISSED */
	:: else -> skip
	fi
#endif
}

/*
 * qps_prio_run(): drain, record backlog, release or drain again. Before
 * the release the owner may linger (qps_prio_linger(): a contended owner
 * polls the head cell for a while): a published item found there means
 * drain again; giving up is always possible (timeout, budget, linger off).
 */
inline run_owner()
{
	do
	:: do
	   :: drain();
	      if
	      :: !stopped && cell_seq[cons % CAP] == cons ->
#ifdef REACH_LINGER_HIT
			assert(false);
#endif
			skip
	      :: true -> break
	      fi
	   od;
	   compute_backlog();
	   release();
	   if
	   :: ok -> break
	   :: else -> skip
	   fi
	od
}

/* qps_prio_flag(): take the word or set MISSED; with @sc and MISSED seen
 * set, return without a write. took = we are now the owner. */
inline flag(sc)
{
	s = state;			/* seq_cst load */
	do
	:: sc && s == (OWNER | MISSED) ->
#ifdef REACH_SKIP
		assert(false);
#endif
		took = false;
		break
	:: else ->
		sb_flush();		/* the locked RMW drains the buffer */
#ifdef MUT_PLAIN_FLAG
		s = state;
		if
		:: s == 0 -> atomic { state = OWNER; become_owner() }; took = true
		:: else -> state = s | MISSED; took = false
		fi;
		break
#else
		atomic {
			if
			:: state == s ->
				if
				:: s == 0 -> state = OWNER; become_owner();
					took = true
				:: else -> state = s | MISSED; took = false
				fi;
				ok = true
			:: else -> s = state; ok = false
			fi
		}
		if
		:: ok -> break
		:: else -> skip
		fi
#endif
	od
}

/* qps_prio_push(): claim (one step) and publish the position word; a
 * release publish goes through the store buffer (unless we own the word:
 * only the owner reads cells, and it sees its own stores). */
inline push(sc, mine)
{
	atomic {
		if
		:: USED(head, cons) < CAP -> pos = head; head++; ok = true;
			whose[pos] = _pid; pend[_pid]++;
#ifdef ORDER_ALL
			q = true
#endif
		:: else -> ok = false
		fi
	}
	if
	:: ok && (sc || mine) -> cell_seq[pos % CAP] = pos
	:: ok && !(sc || mine) -> sb = pos
	:: else -> skip
	fi
}

/*
 * qps_prio_bypass_locked(), tx.c qps_tx_one(): a sender holding sq->lock
 * posts its item itself, without the word, if no owner runs and the last
 * one left no backlog. An owner that takes the word after the look posts
 * under the lock, so after this post. lb = posted. A batch keeps the lock
 * from one item to the next: a subset of these interleavings, where
 * nothing takes the lock between the unlock and the next lock().
 */
inline locked_bypass()
{
	lock();
#ifdef MUT_LOCKED_NO_STATE
	s = 0;
#else
	s = state;			/* acquire */
#endif
	if
	:: s == 0 ->
#ifdef MUT_LOCKED_NO_BACKLOG
		lb = true
#else
		lb = !backlog		/* ordered by the acquire */
#endif
	:: else -> skip
	fi;
	if
	:: lb ->
#ifdef REACH_LOCKED_BYPASS
		assert(false);
#endif
		atomic {
			assert(lk == _pid);
			no_overtake();
			lposted++
		}
	:: else -> skip
	fi;
	unlock()
}

/* qps_prio_enqueue(): take the free word and bypass, or queue and flag
 * (the item's usual way, and the locked bypass's fallback). */
inline enqueue()
{
	s = state;			/* relaxed */
	took = false;
#ifdef MUT_PLAIN_TAKE
	if
	:: s == 0 -> atomic { state = OWNER; become_owner() };
		took = true
	:: else -> skip
	fi;
#else
	if
	:: s == 0 ->
		atomic {
			if
			:: state == 0 -> state = OWNER; become_owner();
				took = true
			:: else -> s = state
			fi
		}
	:: else -> skip
	fi;
#endif
	if
	:: took && !backlog ->
		/* Bypass: post our item directly; the post may
		 * refuse, which the model never lets it do here
		 * (refusals are modelled in drain()). */
		lock();
		atomic {
			assert(lk == _pid);
			assert(owner == _pid);
			no_overtake();
			posted++
		};
		unlock();
#ifdef REACH_BYPASS
		assert(false);
#endif
		atomic {
			if
			:: state == OWNER -> leave_owner(); state = 0;
				ok = true
			:: else -> ok = false
			fi
		}
		if
		:: !ok ->
			/* qps_prio_slow_finish(). */
			release();
			if
			:: !ok -> run_owner()
			:: else -> skip
			fi
		:: else -> skip
		fi
	:: took && backlog ->
		/* qps_prio_slow_owner(). */
		push(false, true);
		if
		:: !ok ->
			/* Full: drain, and retry if that posted any. */
			p0 = posted;
			drain();
			if
			:: posted != p0 -> push(false, true)
			:: else -> skip
			fi
		:: else -> skip
		fi;
		if
		:: !ok -> dropped++
		:: else -> skip
		fi;
		run_owner()
	:: !took ->
		/* qps_prio_slow_queue(). */
		sc = (s == (OWNER | MISSED));
#ifdef MUT_SKIP_RELEASE_PUBLISH
		push(false, false);
		/* The load below may pass the buffered store. */
		if
		:: sb_flush()
		:: skip
		fi;
#else
		push(sc, false);
		/* Not seq_cst: our load of the word may pass it. */
		if
		:: sb_flush()
		:: skip
		fi;
#endif
		if
		:: ok ->
			flag(sc);
			if
			:: took -> run_owner()
			:: else -> skip
			fi
		:: else -> dropped++
		fi
	fi
}

proctype producer()
{
	byte item = 0;
	byte s, c, h, n, k, i, pos, p0;
	byte sb = NONE;
	bool ok, took, sc, stopped, lb;
#ifdef ORDER_ALL
	bool q;
	byte j;
#endif

	do
	:: item == NITEMS -> break
	:: else ->
		atomic { item++; lb = false; send_begin() };
		/* "true ->": an option that opened with sb_flush()'s if
		 * would have its else taken as this selection's, which the
		 * skip option never leaves enabled. */
		if
		:: true -> skip		/* not under sq->lock, or not tried */
		:: true -> locked_bypass()
		fi;
		if
		:: !lb -> enqueue()
		:: else -> skip
		fi
#ifdef ORDER_ALL
		;
		send_end()
#endif
	od;
	/* Returned; a buffered store still drains eventually. */
	sb_flush();
	returned++
}

/* Completion reaping after a stall: qps_prio_kick(). */
proctype reaper()
{
	byte s, c, h, n, k, i, pos;
	byte sb = NONE;
	bool ok, took, stopped;

end:
	do
	:: atomic { stalls > kicks -> kicks++; reaper_busy = true };
		flag(false);
		if
		:: took ->
#ifdef REACH_KICK_RUN
			assert(false);
#endif
			run_owner()
		:: else -> skip
		fi;
		reaper_busy = false
	od
}

init
{
	byte i;

	atomic {
		i = 0;
		do
		:: i < CAP -> cell_seq[i] = i - CAP; i++
		:: else -> break
		od;
		run reaper();
		i = 0;
		do
		:: i < NPROD -> run producer(); i++
		:: else -> break
		od
	}
	/* Every producer returned, no kick pending or running. */
	(returned == NPROD && stalls == kicks && !reaper_busy);
	assert(posted + lposted + dropped == TOTAL);
	assert(head == cons);
	assert(state == 0 && nowners == 0 && lk == NONE);
	finished = true
}
