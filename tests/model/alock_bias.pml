/* SPDX-License-Identifier: MIT */
/*
 * alock_bias.pml - the biased send queue lock of src/alock.h (a
 * multi-threaded context): two application threads, either of which may
 * become the lock's owner and take its fast side, and NLIB library
 * threads (the doorbell flusher) that only ever take the mutex.
 *
 * Every thread's memory is x86-TSO, as in alock.pml: its plain stores
 * (app_in, lib_want, owner, app_mutex and the guarded counter) enter its
 * own FIFO store buffer, drained into memory by a separate process at any
 * time; its loads see its own newest buffered store first; a locked
 * instruction (the mutex's) waits for its buffer to drain. membarrier is
 * one atomic step that drains every buffer. The run bookkeeping (last,
 * runlen, bias_run) is only touched under the mutex, whose acquire and
 * release drain the holder's buffer, so it is kept sequentially
 * consistent here.
 *
 * Each section increments a counter that only the lock guards and counts
 * itself in a ghost. Checked: no two sections overlap; no update is lost;
 * no invalid end state.
 *
 * Mutants (spin -DMUT_...), each must fail:
 *  MUT_NO_MEMBARRIER	closing the fast side skips membarrier
 *  MUT_NO_WAIT		closing does not wait for app_in == 0
 *  MUT_EARLY_APP_MUTEX	a non-owner marks app_mutex before it has closed
 *			the fast side (the owner, still inside, takes the
 *			mark for its own and unlocks the mutex)
 *  MUT_OWNER_MOVES	a run makes its thread the owner even when there
 *			is one (a stale owner's look then lets two in)
 *
 * Reachability probes (spin -DREACH_...), each must fail:
 *  REACH_FAST		the owner takes the fast side
 *  REACH_REOPEN	the owner reopens the fast side after a close
 *  REACH_CLOSE_WAITS	a closing thread finds the owner inside and waits
 */
#ifndef NAPP
#define NAPP 3
#endif
#ifndef NLIB
#define NLIB 1
#endif
#ifndef RUN
#define RUN 1
#endif
#define RUN_MAX (RUN * 4)
#define NT (2 + NLIB)
#define SB 3
#define V_APP_IN 0
#define V_WANT 1
#define V_OWNER 2
#define V_APPMUTEX 3
#define V_COUNT 4
#define NV 5
#define TOTAL (2 * NAPP + NLIB)

/* Memory: mem[V_...]. owner is 0 or a thread's id + 1. */
byte mem[NV];
byte mutex;

/* Under the mutex. */
byte last;
byte runlen;
byte bias_run = RUN;

/* Store buffers, oldest first: thread t's i-th entry at t * SB + i. */
byte sb_var[NT * SB];
byte sb_val[NT * SB];
byte sb_n[NT];

/* Ghosts. */
byte inside;
byte done;

inline store(t, var, val)
{
	atomic {
		sb_n[t] < SB ->
		sb_var[t * SB + sb_n[t]] = var;
		sb_val[t * SB + sb_n[t]] = val;
		sb_n[t]++
	}
}

/* Thread t's load: its newest buffered store of var, else memory. */
inline load(t, var, v)
{
	atomic {
		v = mem[var];
		i = 0;
		do
		:: i < sb_n[t] ->
			if
			:: sb_var[t * SB + i] == var -> v = sb_val[t * SB + i]
			:: else -> skip
			fi;
			i++
		:: else -> break
		od;
		i = 0
	}
}

inline drain_one(t)
{
	mem[sb_var[t * SB]] = sb_val[t * SB];
	sb_var[t * SB] = sb_var[t * SB + 1];
	sb_val[t * SB] = sb_val[t * SB + 1];
	sb_var[t * SB + 1] = sb_var[t * SB + 2];
	sb_val[t * SB + 1] = sb_val[t * SB + 2];
	sb_n[t]--
}

inline drain_all()
{
	for (d : 0 .. NT - 1) {
		do
		:: sb_n[d] > 0 -> drain_one(d)
		:: else -> break
		od
	}
	d = 0
}

proctype drainer(byte t)
{
end:	do
	:: atomic { sb_n[t] > 0 -> drain_one(t) }
	od
}

/* Locked instructions: the thread's own buffer drains first. */
inline mutex_lock(t)
{
	atomic { sb_n[t] == 0 && mutex == 0 -> mutex = 1 }
}

inline mutex_unlock(t)
{
	atomic { sb_n[t] == 0 -> mutex = 0 }
}

/* qps_alock_close, under the mutex; grow: an application thread's. */
inline close(t, grow)
{
	load(t, V_WANT, v);
	if
	:: v == 0 ->
		store(t, V_WANT, 1);
#ifndef MUT_NO_MEMBARRIER
		atomic { drain_all() };
#endif
#ifdef REACH_CLOSE_WAITS
		assert(mem[V_APP_IN] == 0);
#endif
#ifndef MUT_NO_WAIT
		(mem[V_APP_IN] == 0);
#endif
		if
		:: grow && bias_run < RUN_MAX -> bias_run = bias_run * 2
		:: else -> skip
		fi
	:: else -> skip
	fi
}

/* qps_alock_count, under the mutex. */
inline count(t)
{
	if
	:: last != t + 1 -> last = t + 1; runlen = 0
	:: else -> skip
	fi;
	runlen++;
	if
	:: runlen >= bias_run ->
		runlen = 0;
		load(t, V_OWNER, o);
#ifdef MUT_OWNER_MOVES
		if
		:: o != t + 1 -> store(t, V_OWNER, t + 1); o = t + 1
		:: else -> skip
		fi;
#else
		if
		:: o == 0 -> store(t, V_OWNER, t + 1); o = t + 1
		:: else -> skip
		fi;
#endif
		if
		:: o == t + 1 ->
#ifdef REACH_REOPEN
			assert(bias_run == RUN);
#endif
			store(t, V_WANT, 0)
		:: else -> skip
		fi
	:: else -> skip
	fi
}

inline section(t)
{
	atomic { assert(inside == 0); inside++ };
	load(t, V_COUNT, v);
	store(t, V_COUNT, v + 1);
	inside--
}

proctype app(byte t)
{
	byte k, v, o, i, d;

	for (k : 1 .. NAPP) {
		/* qps_alock_lock */
		load(t, V_OWNER, o);
		if
		:: o != t + 1 ->
			/* qps_alock_lock_other */
			mutex_lock(t);
#ifdef MUT_EARLY_APP_MUTEX
			store(t, V_APPMUTEX, 1);
			close(t, true);
#else
			close(t, true);
			store(t, V_APPMUTEX, 1);
#endif
			count(t)
		:: else ->
			store(t, V_APP_IN, 1);
			load(t, V_WANT, v);
			if
			:: v ->
				/* qps_alock_lock_app_slow */
				store(t, V_APP_IN, 0);
				mutex_lock(t);
				store(t, V_APPMUTEX, 1);
				count(t)
			:: else ->
#ifdef REACH_FAST
				assert(false);
#endif
				skip
			fi
		fi;
		section(t);
		/* qps_alock_unlock */
		load(t, V_APPMUTEX, v);
		if
		:: v -> store(t, V_APPMUTEX, 0); mutex_unlock(t)
		:: else -> store(t, V_APP_IN, 0)
		fi
	}
	atomic { sb_n[t] == 0 -> done++ }
}

proctype lib(byte t)
{
	byte v, i, d;

	/* qps_alock_lock_lib */
	mutex_lock(t);
	close(t, false);
	last = 0;
	section(t);
	/* qps_alock_unlock_lib: the fast side stays closed */
	mutex_unlock(t);
	done++
}

init
{
	byte j;

	mem[V_WANT] = 1;
	atomic {
		for (j : 0 .. NT - 1) {
			run drainer(j)
		}
		run app(0);
		run app(1);
		for (j : 2 .. NT - 1) {
			run lib(j)
		}
	}
	(done == NT);
	assert(mem[V_COUNT] == TOTAL && mutex == 0);
	assert(sb_n[0] == 0 && sb_n[1] == 0)
}
