/* SPDX-License-Identifier: MIT */
/*
 * alock.pml - the two-sided send queue lock of src/alock.h in a
 * single-threaded context: one application side (its threads take turns,
 * as the context's user promised, so they are one process here) and NLIB
 * library threads (the doorbell flusher and the like).
 *
 * The application side's synchronisation is a plain store and a plain
 * load with only a compiler barrier between them, so its memory is
 * modelled as x86-TSO: its stores enter a FIFO store buffer (SB entries)
 * that a separate process drains into memory at any time, its loads see
 * its own latest buffered store of a location first, and a locked
 * instruction (the mutex) waits for the buffer to drain. The library
 * side only uses locked instructions and membarrier(2), which are full
 * barriers, so its accesses are sequentially consistent. membarrier is
 * one atomic step that drains the application's buffer: the barrier the
 * interrupt runs on the application's CPU, at whatever point of its code
 * the interrupt lands.
 *
 * Each side's section increments a shared counter that only the lock
 * guards (load, then store: the application's store goes through its
 * buffer) and marks itself inside with a ghost flag.
 *
 * Checked (assertions): no library section overlaps an application
 * section or another library section; at the end the counter holds
 * every section's increment (no lost update, so every section saw the
 * previous one's store); invalid end states (a side waiting for ever).
 *
 * Mutants (spin -DMUT_...), each must fail:
 *  MUT_NO_MEMBARRIER	the library side skips membarrier
 *  MUT_NO_WAIT		the library side does not wait for app_in == 0
 *  MUT_APP_NO_CHECK	the application side does not look at lib_want
 *  MUT_APP_SLOW_KEEPS_IN	the application's slow path queues on the
 *			mutex without stepping out (app_in stays 1)
 *  MUT_LATE_CLEAR	the library side clears lib_want after it unlocks
 *			the mutex
 *
 * Reachability probes (spin -DREACH_...), each must fail:
 *  REACH_APP_SLOW	the application finds lib_want set, takes the mutex
 *  REACH_LIB_WAITS	a library thread, after its membarrier, finds the
 *			application inside and waits
 */
#ifndef NAPP
#define NAPP 2
#endif
#ifndef NLIB
#define NLIB 2
#endif
#ifndef NLIBR
#define NLIBR 1
#endif
#define SB 3
#define V_APP_IN 0
#define V_COUNT 1
#define TOTAL (NAPP + NLIB * NLIBR)

/* Memory. */
byte mutex;
bool app_in;
bool lib_want;
byte count;

/* The application's store buffer, oldest first. */
byte sb_var[SB];
byte sb_val[SB];
byte sb_n;

/* Ghosts. */
bool app_inside;
byte lib_inside;
byte done;

inline app_store(var, val)
{
	atomic {
		sb_n < SB ->
		sb_var[sb_n] = var;
		sb_val[sb_n] = val;
		sb_n++
	}
}

/* The application's load of count: its newest buffered store wins. */
inline app_load_count(v)
{
	atomic {
		v = count;
		i = 0;
		do
		:: i < sb_n ->
			if
			:: sb_var[i] == V_COUNT -> v = sb_val[i]
			:: else -> skip
			fi;
			i++
		:: else -> break
		od
	}
}

inline drain_one()
{
	if
	:: sb_var[0] == V_APP_IN -> app_in = sb_val[0]
	:: else -> count = sb_val[0]
	fi;
	sb_var[0] = sb_var[1];
	sb_val[0] = sb_val[1];
	sb_var[1] = sb_var[2];
	sb_val[1] = sb_val[2];
	sb_n--
}

inline drain_all()
{
	do
	:: sb_n > 0 -> drain_one()
	:: else -> break
	od
}

proctype drainer()
{
end:	do
	:: atomic { sb_n > 0 -> drain_one() }
	od
}

inline app_section()
{
	app_inside = true;
	assert(lib_inside == 0);
	app_load_count(v);
	app_store(V_COUNT, v + 1);
	app_inside = false
}

proctype app()
{
	byte k, v, i;
	bool via_mutex;

	for (k : 1 .. NAPP) {
		/* qps_alock_lock */
		app_store(V_APP_IN, 1);
#ifdef MUT_APP_NO_CHECK
		via_mutex = false;
#else
		if
		:: lib_want ->
#ifdef REACH_APP_SLOW
			assert(false);
#endif
#ifndef MUT_APP_SLOW_KEEPS_IN
			app_store(V_APP_IN, 0);
#endif
			/* A locked instruction: the buffer drains first. */
			atomic { sb_n == 0 && mutex == 0 -> mutex = 1 };
			via_mutex = true
		:: else -> via_mutex = false
		fi;
#endif
		app_section();
		/* qps_alock_unlock */
		if
		:: via_mutex -> atomic { sb_n == 0 -> mutex = 0 }
		:: else -> app_store(V_APP_IN, 0)
		fi
	}
	atomic { sb_n == 0 -> done++ }
}

proctype lib()
{
	byte k, v;

	for (k : 1 .. NLIBR) {
		/* qps_alock_lock_lib */
		atomic { mutex == 0 -> mutex = 1 };
		lib_want = true;
#ifndef MUT_NO_MEMBARRIER
		atomic { drain_all() };
#endif
#ifdef REACH_LIB_WAITS
		assert(!app_in);
#endif
#ifndef MUT_NO_WAIT
		(!app_in);
#endif
		lib_inside++;
		assert(!app_inside && lib_inside == 1);
		v = count;
		count = v + 1;
		lib_inside--;
		/* qps_alock_unlock_lib */
#ifdef MUT_LATE_CLEAR
		mutex = 0;
		lib_want = false;
#else
		lib_want = false;
		mutex = 0;
#endif
	}
	done++
}

init
{
	byte j;

	atomic {
		run drainer();
		run app();
		for (j : 1 .. NLIB) {
			run lib()
		}
	}
	(done == NLIB + 1);
	assert(sb_n == 0 && count == TOTAL && mutex == 0 && !lib_want)
}
