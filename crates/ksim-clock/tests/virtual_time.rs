//! The virtual clock as components see it: time stands still, advancing
//! fires timers in order with the cluster settled between them.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use ksim_clock::{Clock, Random};

fn start() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .expect("valid time")
        .with_timezone(&Utc)
}

#[tokio::test(flavor = "current_thread")]
async fn time_stands_still_until_advanced() {
    let clock = Clock::virtual_at(start());
    assert_eq!(clock.now(), start());
    tokio::task::yield_now().await;
    assert_eq!(clock.now(), start());
    let now = clock
        .advance(Duration::from_secs(90))
        .await
        .expect("virtual");
    assert_eq!(now, start() + chrono::Duration::seconds(90));
    assert_eq!(clock.now_rfc3339(), "2026-01-01T00:01:30Z");
}

#[tokio::test(flavor = "current_thread")]
async fn advancing_fires_timers_in_order_each_seeing_its_own_time() {
    let clock = Clock::virtual_at(start());
    let seen = Arc::new(Mutex::new(Vec::new()));
    for seconds in [30u64, 10, 20] {
        let clock = clock.clone();
        let seen = seen.clone();
        tokio::spawn(async move {
            clock.sleep(Duration::from_secs(seconds)).await;
            seen.lock().expect("lock").push((seconds, clock.now()));
        });
    }
    clock.settle().await.expect("settles");
    assert_eq!(
        clock.next_timer(),
        Some(start() + chrono::Duration::seconds(10))
    );
    clock
        .advance(Duration::from_secs(25))
        .await
        .expect("virtual");
    assert_eq!(
        *seen.lock().expect("lock"),
        vec![
            (10, start() + chrono::Duration::seconds(10)),
            (20, start() + chrono::Duration::seconds(20)),
        ]
    );
    clock
        .advance(Duration::from_secs(5))
        .await
        .expect("virtual");
    assert_eq!(seen.lock().expect("lock").len(), 3);
    assert_eq!(clock.next_timer(), None);
}

#[tokio::test(flavor = "current_thread")]
async fn a_chain_of_timers_set_by_timers_all_fire_within_one_advance() {
    let clock = Clock::virtual_at(start());
    let ticks = Arc::new(Mutex::new(Vec::new()));
    {
        let clock = clock.clone();
        let ticks = ticks.clone();
        tokio::spawn(async move {
            let mut interval = clock.interval(Duration::from_secs(10));
            loop {
                let due = interval.tick().await;
                ticks.lock().expect("lock").push(due);
            }
        });
    }
    clock
        .advance(Duration::from_secs(60))
        .await
        .expect("virtual");
    // The first tick is at once, then one every 10 s up to and including 60 s.
    assert_eq!(ticks.lock().expect("lock").len(), 7);
}

#[tokio::test(flavor = "current_thread")]
async fn fire_next_stops_at_the_limit_and_leaves_time_alone_when_nothing_is_due() {
    let clock = Clock::virtual_at(start());
    let limit = start() + chrono::Duration::seconds(5);
    assert_eq!(clock.fire_next(limit).await.expect("virtual"), None);
    let sleeper = {
        let clock = clock.clone();
        tokio::spawn(async move { clock.sleep(Duration::from_secs(10)).await })
    };
    assert_eq!(clock.fire_next(limit).await.expect("virtual"), None);
    assert_eq!(clock.now(), start());
    let later = start() + chrono::Duration::seconds(60);
    assert_eq!(
        clock.fire_next(later).await.expect("virtual"),
        Some(start() + chrono::Duration::seconds(10))
    );
    sleeper.await.expect("the sleeper finished");
}

#[tokio::test(flavor = "current_thread")]
async fn settling_waits_for_busy_work_to_finish() {
    let clock = Clock::virtual_at(start());
    let done = Arc::new(Mutex::new(false));
    let busy = clock.busy();
    {
        let done = done.clone();
        tokio::spawn(async move {
            for _ in 0..50 {
                tokio::task::yield_now().await;
            }
            *done.lock().expect("lock") = true;
            drop(busy);
        });
    }
    clock.settle().await.expect("settles");
    assert!(*done.lock().expect("lock"));
}

#[tokio::test(flavor = "current_thread")]
async fn a_dropped_sleep_leaves_no_timer_and_timeouts_use_the_clock() {
    let clock = Clock::virtual_at(start());
    drop(clock.sleep(Duration::from_secs(5)));
    assert_eq!(clock.next_timer(), None);
    let waiter = {
        let clock = clock.clone();
        tokio::spawn(async move {
            clock
                .timeout(Duration::from_secs(30), std::future::pending::<()>())
                .await
        })
    };
    clock
        .advance(Duration::from_secs(29))
        .await
        .expect("virtual");
    assert!(!waiter.is_finished());
    clock
        .advance(Duration::from_secs(1))
        .await
        .expect("virtual");
    assert!(waiter.await.expect("joined").is_err());
}

#[tokio::test(start_paused = true)]
async fn a_real_clock_sleeps_on_tokio_time_and_cannot_be_advanced() {
    let clock = Clock::real_with(Random::seeded(1));
    let before = clock.instant();
    clock.sleep(Duration::from_secs(3)).await;
    assert!(clock.instant() - before >= Duration::from_secs(3));
    assert!(clock.advance(Duration::from_secs(1)).await.is_err());
    assert_eq!(clock.random().seed(), Some(1));
}
