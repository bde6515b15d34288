//! The Nexmark benchmark's event stream: persons, auctions and bids of an
//! online auction site, in the proportions 1 : 3 : 46, with hot auctions,
//! sellers and bidders, following the rules of the reference generator
//! (the Nexmark Flink/Beam generator; reimplemented here).
//!
//! Invariant: event `n` is a pure function of the [`Config`] and `n` (each
//! event draws from its own random stream, seeded by the config's seed and
//! `n`). So a stream is reproducible from its seed, any event can be made
//! on its own, and generation can be split across threads.
//!
//! Ids are dense and ordered: the k-th person has id `FIRST_PERSON_ID + k`,
//! the k-th auction `FIRST_AUCTION_ID + k`. A bid names an auction that
//! exists or is at most `AUCTION_ID_LEAD` ahead of the newest (as in the
//! reference, so joins see some bids before their auction).

#![forbid(unsafe_code)]

use serde::Serialize;

pub const FIRST_PERSON_ID: u64 = 1000;
pub const FIRST_AUCTION_ID: u64 = 1000;
pub const FIRST_CATEGORY_ID: u64 = 10;
/// Bids may name auctions up to this many ids past the newest.
pub const AUCTION_ID_LEAD: u64 = 10;
/// Bids and auctions may name persons up to this many ids past the newest.
pub const PERSON_ID_LEAD: u64 = 10;
const CATEGORIES: u64 = 5;
/// Hot auctions, sellers and bidders are the first in each batch of this many.
const HOT_BATCH: u64 = 100;
const HOT_CHANNELS: [&str; 4] = ["Google", "Facebook", "Baidu", "Apple"];
const CHANNELS: u64 = 10_000;
const US_STATES: [&str; 6] = ["AZ", "CA", "ID", "OR", "WA", "WY"];
const US_CITIES: [&str; 10] =
    ["Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"];
const FIRST_NAMES: [&str; 11] =
    ["Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"];
const LAST_NAMES: [&str; 9] = ["Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"];

/// Generator parameters. Defaults are the reference generator's.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub seed: u64,
    /// Event time of event 0, in ms since the epoch. Fixed by default so that
    /// a seed alone determines the stream.
    pub base_time_ms: i64,
    /// Event-time rate: event `n` happens at `base_time_ms + n * 1000 / rate`.
    pub events_per_second: u64,
    pub person_proportion: u64,
    pub auction_proportion: u64,
    pub bid_proportion: u64,
    /// A bid is for a hot auction with probability `1 - 1/hot_auction_ratio`.
    pub hot_auction_ratio: u64,
    /// An auction is by a hot seller with probability `1 - 1/hot_sellers_ratio`.
    pub hot_sellers_ratio: u64,
    /// A bid is by a hot bidder with probability `1 - 1/hot_bidders_ratio`.
    pub hot_bidders_ratio: u64,
    /// Persons eligible to sell or bid: the most recent this many.
    pub active_people: u64,
    /// Auctions eligible for (non-hot) bids: the most recent this many.
    pub in_flight_auctions: u64,
    pub avg_person_bytes: usize,
    pub avg_auction_bytes: usize,
    pub avg_bid_bytes: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            seed: 0,
            base_time_ms: 1_700_000_000_000,
            events_per_second: 10_000,
            person_proportion: 1,
            auction_proportion: 3,
            bid_proportion: 46,
            hot_auction_ratio: 2,
            hot_sellers_ratio: 4,
            hot_bidders_ratio: 4,
            active_people: 1000,
            in_flight_auctions: 100,
            avg_person_bytes: 200,
            avg_auction_bytes: 500,
            avg_bid_bytes: 100,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Person {
    pub id: u64,
    pub name: String,
    pub email_address: String,
    pub credit_card: String,
    pub city: String,
    pub state: String,
    pub date_time: i64,
    pub extra: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Auction {
    pub id: u64,
    pub item_name: String,
    pub description: String,
    pub initial_bid: u64,
    pub reserve: u64,
    pub date_time: i64,
    pub expires: i64,
    pub seller: u64,
    pub category: u64,
    pub extra: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Bid {
    pub auction: u64,
    pub bidder: u64,
    pub price: u64,
    pub channel: String,
    pub url: String,
    pub date_time: i64,
    pub extra: String,
}

/// One event of the stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    Person(Person),
    Auction(Auction),
    Bid(Bid),
}

impl Event {
    /// The topic this event belongs to.
    pub fn topic(&self) -> &'static str {
        match self {
            Event::Person(_) => "person",
            Event::Auction(_) => "auction",
            Event::Bid(_) => "bid",
        }
    }
    /// The record key: the person or auction id; a bid's auction.
    pub fn key(&self) -> u64 {
        match self {
            Event::Person(p) => p.id,
            Event::Auction(a) => a.id,
            Event::Bid(b) => b.auction,
        }
    }
    pub fn date_time(&self) -> i64 {
        match self {
            Event::Person(p) => p.date_time,
            Event::Auction(a) => a.date_time,
            Event::Bid(b) => b.date_time,
        }
    }
    /// The event as one JSON object.
    pub fn to_json(&self) -> String {
        match self {
            Event::Person(p) => serde_json::to_string(p),
            Event::Auction(a) => serde_json::to_string(a),
            Event::Bid(b) => serde_json::to_string(b),
        }
        .expect("events serialize")
    }
}

/// SplitMix64's output function: a bijective 64-bit mixer.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// SplitMix64: a small, fast, well-mixed generator; one stream per event.
#[derive(Debug)]
struct Random(u64);

impl Random {
    /// The stream of event `event`. Seed and event number are each mixed
    /// before combining: a plain `seed ^ event * step` start would make
    /// neighbouring events' streams shifted copies of each other.
    fn for_event(seed: u64, event: u64) -> Random {
        Random(mix64(mix64(seed) ^ mix64(event.wrapping_add(0x632b_e59b_d9b4_e019))))
    }
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix64(self.0)
    }
    /// Uniform in `0..n` (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn pick<'a>(&mut self, choices: &[&'a str]) -> &'a str {
        choices[self.below(choices.len() as u64) as usize]
    }
    fn string(&mut self, len: usize) -> String {
        (0..len).map(|_| (b'a' + self.below(26) as u8) as char).collect()
    }
    /// Padding that brings an event of `current` bytes to about `average`.
    fn extra(&mut self, current: usize, average: usize) -> String {
        if current >= average {
            return String::new();
        }
        let target = average - current;
        let spread = target / 5;
        let len = target - spread + self.below(2 * spread as u64 + 1) as usize;
        self.string(len)
    }
    /// The reference price distribution: 10^(6u) dollars, in cents.
    fn price(&mut self) -> u64 {
        (10f64.powf(self.unit() * 6.0) * 100.0).round() as u64
    }
}

/// Makes events by number.
#[derive(Clone, Debug)]
pub struct Generator {
    config: Config,
    total_proportion: u64,
}

impl Generator {
    pub fn new(config: Config) -> Generator {
        assert!(config.person_proportion > 0 && config.auction_proportion > 0, "persons and auctions are needed");
        assert!(config.events_per_second > 0, "a positive event rate");
        assert!(
            config.hot_auction_ratio > 0 && config.hot_sellers_ratio > 0 && config.hot_bidders_ratio > 0,
            "hot ratios are at least 1 (1 = never hot)"
        );
        let total_proportion = config.person_proportion + config.auction_proportion + config.bid_proportion;
        Generator { config, total_proportion }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Event time of event `n` (saturating at `i64::MAX` for absurd `n`).
    pub fn timestamp_ms(&self, n: u64) -> i64 {
        let offset = u128::from(n) * 1000 / u128::from(self.config.events_per_second);
        self.config.base_time_ms.saturating_add(i64::try_from(offset).unwrap_or(i64::MAX))
    }

    /// The newest person id (base 0) as of event `n`: `n`'s own if it is a person.
    fn last_person(&self, n: u64) -> u64 {
        let (epoch, offset) = (n / self.total_proportion, n % self.total_proportion);
        epoch * self.config.person_proportion + offset.min(self.config.person_proportion - 1)
    }

    /// The newest auction id (base 0) as of event `n`: `n`'s own if it is an
    /// auction. (Before the first auction it would be -1; only person events
    /// are there, and they never ask, so it saturates at 0.)
    fn last_auction(&self, n: u64) -> u64 {
        let (epoch, offset) = (n / self.total_proportion, n % self.total_proportion);
        let (persons, auctions) = (self.config.person_proportion, self.config.auction_proportion);
        if offset < persons {
            (epoch * auctions).saturating_sub(1)
        } else if offset >= persons + auctions {
            epoch * auctions + auctions - 1
        } else {
            epoch * auctions + offset - persons
        }
    }

    /// A person among the active ones, or a few ids ahead.
    fn some_person(&self, n: u64, random: &mut Random) -> u64 {
        let people = self.last_person(n) + 1;
        let active = people.min(self.config.active_people);
        people - active + random.below(active + PERSON_ID_LEAD)
    }

    /// An auction among those in flight, or a few ids ahead.
    fn some_auction(&self, n: u64, random: &mut Random) -> u64 {
        let newest = self.last_auction(n);
        let oldest = newest.saturating_sub(self.config.in_flight_auctions);
        oldest + random.below(newest - oldest + 1 + AUCTION_ID_LEAD)
    }

    /// Event number `n`.
    pub fn event(&self, n: u64) -> Event {
        let mut random = Random::for_event(self.config.seed, n);
        let date_time = self.timestamp_ms(n);
        let offset = n % self.total_proportion;
        if offset < self.config.person_proportion {
            Event::Person(self.person(n, date_time, &mut random))
        } else if offset < self.config.person_proportion + self.config.auction_proportion {
            Event::Auction(self.auction(n, date_time, &mut random))
        } else {
            Event::Bid(self.bid(n, date_time, &mut random))
        }
    }

    fn person(&self, n: u64, date_time: i64, random: &mut Random) -> Person {
        let name = format!("{} {}", random.pick(&FIRST_NAMES), random.pick(&LAST_NAMES));
        let email_address = format!("{}@{}.com", random.string(7), random.string(5));
        let credit_card = (0..4).map(|_| format!("{:04}", random.below(10_000))).collect::<Vec<_>>().join(" ");
        let city = random.pick(&US_CITIES).to_owned();
        let state = random.pick(&US_STATES).to_owned();
        let size = 8 + name.len() + email_address.len() + credit_card.len() + city.len() + state.len();
        let extra = random.extra(size, self.config.avg_person_bytes);
        Person {
            id: FIRST_PERSON_ID + self.last_person(n),
            name,
            email_address,
            credit_card,
            city,
            state,
            date_time,
            extra,
        }
    }

    fn auction(&self, n: u64, date_time: i64, random: &mut Random) -> Auction {
        let id = FIRST_AUCTION_ID + self.last_auction(n);
        let seller = if random.below(self.config.hot_sellers_ratio) > 0 {
            (self.last_person(n) / HOT_BATCH) * HOT_BATCH // the first person of the latest batch
        } else {
            self.some_person(n, random)
        };
        let category = FIRST_CATEGORY_ID + random.below(CATEGORIES);
        let initial_bid = random.price();
        // Auctions last about as long as it takes for `in_flight_auctions`
        // more auctions to appear (on average), as in the reference.
        let events_ahead = self.config.in_flight_auctions * self.total_proportion / self.config.auction_proportion;
        let horizon_ms = (self.timestamp_ms(n.saturating_add(events_ahead)) - date_time).max(1) as u64;
        let expires = date_time + 1 + random.below(horizon_ms * 2) as i64;
        let item_name = random.string(20);
        let description = random.string(100);
        let reserve = initial_bid + random.price();
        let size = 8 + item_name.len() + description.len() + 8 + 8 + 8 + 8 + 8;
        let extra = random.extra(size, self.config.avg_auction_bytes);
        Auction {
            id,
            item_name,
            description,
            initial_bid,
            reserve,
            date_time,
            expires,
            seller: FIRST_PERSON_ID + seller,
            category,
            extra,
        }
    }

    fn bid(&self, n: u64, date_time: i64, random: &mut Random) -> Bid {
        let auction = if random.below(self.config.hot_auction_ratio) > 0 {
            (self.last_auction(n) / HOT_BATCH) * HOT_BATCH
        } else {
            self.some_auction(n, random)
        };
        let bidder = if random.below(self.config.hot_bidders_ratio) > 0 {
            // The second person of the latest batch, so hot bidders are not hot sellers.
            (self.last_person(n) / HOT_BATCH) * HOT_BATCH + 1
        } else {
            self.some_person(n, random)
        };
        let price = random.price();
        let (channel, url) = if random.below(HOT_BATCH) > 0 {
            let index = random.below(HOT_CHANNELS.len() as u64) as usize;
            (HOT_CHANNELS[index].to_owned(), format!("https://www.nexmark.com/hot/{index}/item.htm?query=1"))
        } else {
            let channel = random.below(CHANNELS);
            (
                format!("channel-{channel}"),
                format!(
                    "https://www.nexmark.com/{}/{}/{}/item.htm?query=1&channel_id={channel}",
                    random.string(5),
                    random.string(5),
                    random.string(5)
                ),
            )
        };
        let extra = random.extra(8 + 8 + 8 + 8, self.config.avg_bid_bytes);
        Bid {
            auction: FIRST_AUCTION_ID + auction,
            bidder: FIRST_PERSON_ID + bidder,
            price,
            channel,
            url,
            date_time,
            extra,
        }
    }
}
