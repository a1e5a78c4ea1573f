//! metadata-dataset: the video-metadata dataset, deterministic. The same seed and row count give the same
//! rows, the same sample ids and (with the same SQLite build) the same file, so every runtime and every
//! machine reads the same data. `metadata-rs gen-data` writes it from the command line; compare and
//! ladder-rs's tests call [`run`] directly, which is why this is a crate of its own: they need the
//! generator, not the server.
//!
//! Rows look like a video platform's: 11-character ids, channel names in five scripts, durations mostly
//! minutes with a long tail past an hour (and the formatting edges 0, 59, 60, 3599 and 3600 s), view counts
//! spread log-uniformly from 10 to about 30 million (roughly a quarter above the trending line), and
//! localized titles and descriptions in English (always), Japanese, Korean, Traditional Chinese and Thai,
//! with the quotes, newlines and emoji that exercise JSON escaping.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Instant;

use rusqlite::Connection;
use serde_json::{Map, Value, json};

#[derive(Debug, Clone, clap::Args)]
pub struct GenDataArgs {
    /// The SQLite file to write.
    #[arg(long, default_value = "metadata.db")]
    pub db: PathBuf,
    /// Where to write the sample ids to replay, one per line.
    #[arg(long, default_value = "sample_ids.txt")]
    pub ids: PathBuf,
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub rows: u64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// How many ids to write to the sample file.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub samples: u64,
    /// Share of sample ids that are not in the table, in percent.
    #[arg(long, default_value_t = 1.0)]
    pub absent_percent: f64,
    /// Replace existing files (stop servers reading the old file first).
    #[arg(long)]
    pub force: bool,
}

impl GenDataArgs {
    /// `gen-data`'s defaults but for these: metadata.db and sample_ids.txt in `dir`, `rows` rows, `samples`
    /// sample ids, and `seed` (the tests' datasets, each in its own temp dir).
    pub fn in_dir(dir: &Path, rows: u64, samples: u64, seed: u64) -> GenDataArgs {
        GenDataArgs {
            db: dir.join("metadata.db"),
            ids: dir.join("sample_ids.txt"),
            rows,
            seed,
            samples,
            absent_percent: 1.0,
            force: false,
        }
    }
}

/// What was written, for the summary line and the tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generated {
    pub rows: u64,
    pub samples: u64,
    pub absent: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum GenError {
    #[error("{0} exists; pass --force to replace it")]
    Exists(PathBuf),
    #[error("--absent-percent must be between 0 and 100")]
    AbsentPercent,
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
}

/// The regions the dataset localizes into; `en` is always present.
pub const REGIONS: [&str; 5] = ["ja", "ko", "zh-TW", "en", "th"];

/// Writes the dataset `args` describes: `<db>.partial` and `<ids>.partial`, renamed into place when complete.
pub fn run(args: &GenDataArgs) -> Result<Generated, GenError> {
    if !(0.0..=100.0).contains(&args.absent_percent) {
        return Err(GenError::AbsentPercent);
    }
    for path in [&args.db, &args.ids] {
        if path.exists() && !args.force {
            return Err(GenError::Exists(path.clone()));
        }
    }
    let started = Instant::now();
    let mut rng = SplitMix64(args.seed);
    let partial = with_suffix(&args.db, ".partial");
    remove_db_files(&partial)?;
    let ids = write_rows(&partial, args.rows, &mut rng)?;
    // The old file's WAL and shared-memory files must not be applied to the new one.
    remove_db_files(&args.db)?;
    std::fs::rename(&partial, &args.db).map_err(|source| GenError::Io { path: args.db.clone(), source })?;

    let (samples, absent) = sample_ids(&ids, args.samples, args.absent_percent, &mut rng);
    let mut text = String::with_capacity(samples.len() * 12);
    for id in &samples {
        text.push_str(id);
        text.push('\n');
    }
    let partial_ids = with_suffix(&args.ids, ".partial");
    std::fs::write(&partial_ids, text).map_err(|source| GenError::Io { path: partial_ids.clone(), source })?;
    std::fs::rename(&partial_ids, &args.ids).map_err(|source| GenError::Io { path: args.ids.clone(), source })?;
    tracing::debug!(elapsed = ?started.elapsed(), "dataset written");
    Ok(Generated { rows: args.rows, samples: samples.len() as u64, absent })
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

fn remove_db_files(db: &Path) -> Result<(), GenError> {
    for path in [db.to_path_buf(), with_suffix(db, "-wal"), with_suffix(db, "-shm")] {
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(GenError::Io { path, source }),
        }
    }
    Ok(())
}

/// Creates the table, inserts `rows` rows in one transaction and returns their ids in insertion order.
fn write_rows(path: &Path, rows: u64, rng: &mut SplitMix64) -> Result<Vec<String>, GenError> {
    let mut conn = Connection::open(path)?;
    // WAL lets a writer refresh rows while the servers read; synchronous=OFF only while bulk loading a file
    // nobody reads yet (it is renamed into place after a clean close).
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "OFF")?;
    // A rowid table, not WITHOUT ROWID: rows average about 800 bytes, and WITHOUT ROWID b-trees holding rows
    // that large spill into overflow pages (measured: twice the file size for the same rows).
    conn.execute_batch(
        "CREATE TABLE videos (
            id TEXT PRIMARY KEY,
            channel TEXT NOT NULL,
            duration_s INTEGER NOT NULL,
            views INTEGER NOT NULL,
            locales TEXT NOT NULL
        );",
    )?;
    let mut ids = Vec::with_capacity(rows as usize);
    let mut seen = HashSet::with_capacity(rows as usize);
    let tx = conn.transaction()?;
    {
        let mut insert =
            tx.prepare("INSERT INTO videos (id, channel, duration_s, views, locales) VALUES (?1, ?2, ?3, ?4, ?5)")?;
        for _ in 0..rows {
            let id = loop {
                let candidate = video_id(rng);
                if seen.insert(candidate.clone()) {
                    break candidate;
                }
            };
            let video = video(rng);
            insert.execute(rusqlite::params![id, video.channel, video.duration_s, video.views, video.locales])?;
            ids.push(id);
        }
    }
    tx.commit()?;
    conn.execute_batch("PRAGMA synchronous = FULL; PRAGMA optimize;")?;
    conn.close().map_err(|(_, e)| e)?;
    Ok(ids)
}

fn sample_ids(ids: &[String], count: u64, absent_percent: f64, rng: &mut SplitMix64) -> (Vec<String>, u64) {
    let present: HashSet<&str> = ids.iter().map(String::as_str).collect();
    let mut samples = Vec::with_capacity(count as usize);
    let mut absent = 0;
    for _ in 0..count {
        if rng.unit() * 100.0 < absent_percent {
            let id = loop {
                let candidate = video_id(rng);
                if !present.contains(candidate.as_str()) {
                    break candidate;
                }
            };
            samples.push(id);
            absent += 1;
        } else {
            samples.push(ids[rng.below(ids.len() as u64) as usize].clone());
        }
    }
    (samples, absent)
}

struct Video {
    channel: String,
    duration_s: i64,
    views: i64,
    locales: String,
}

fn video(rng: &mut SplitMix64) -> Video {
    let channel = {
        let name = CHANNELS[rng.below(CHANNELS.len() as u64) as usize];
        if rng.chance(0.3) { format!("{name} {}", 2 + rng.below(98)) } else { name.to_string() }
    };
    let duration_s = match rng.below(100) {
        0 => EDGE_DURATIONS[rng.below(EDGE_DURATIONS.len() as u64) as usize],
        1..=70 => 30 + rng.below(870) as i64,
        71..=91 => 900 + rng.below(2700) as i64,
        _ => 3600 + rng.below(7 * 3600) as i64,
    };
    // log-uniform between 10^1 and 10^7.5
    let views = 10f64.powf(1.0 + rng.unit() * 6.5).round() as i64;
    let topic = rng.below(TOPICS.len() as u64) as usize;
    let template = rng.below(TEMPLATES_PER_LANGUAGE as u64) as usize;
    let number = 2 + rng.below(29);
    let mut locales = Map::new();
    for (lang, share) in [(EN, 1.0), (JA, 0.6), (KO, 0.45), (ZH_TW, 0.4), (TH, 0.3)] {
        if !rng.chance(share) {
            continue;
        }
        let title =
            LANGUAGES[lang].templates[template].replace("{t}", TOPICS[topic][lang]).replace("{n}", &number.to_string());
        let description = description(lang, topic, rng);
        locales.insert(REGION_OF[lang].to_string(), json!({ "title": title, "description": description }));
    }
    Video { channel, duration_s, views, locales: Value::Object(locales).to_string() }
}

fn description(lang: usize, topic: usize, rng: &mut SplitMix64) -> String {
    let sentences = LANGUAGES[lang].sentences;
    let first = LANGUAGES[lang].intro.replace("{t}", TOPICS[topic][lang]);
    let a = sentences[rng.below(sentences.len() as u64) as usize];
    let b = sentences[rng.below(sentences.len() as u64) as usize];
    let tags = TAGS[topic];
    if a == b { format!("{first}\n{a}\n\n{tags}") } else { format!("{first}\n{a}\n{b}\n\n{tags}") }
}

/// 11 characters of the URL-safe base64 alphabet, like the ids of the platform the endpoint serves.
fn video_id(rng: &mut SplitMix64) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let bits = rng.next();
    (0..11).map(|i| ALPHABET[((bits >> (i * 6)) & 63) as usize] as char).collect()
}

/// SplitMix64: tiny, fast and fully specified, so the dataset does not change with a crate's version.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn below(&mut self, n: u64) -> u64 {
        ((self.next() as u128 * n as u128) >> 64) as u64
    }

    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
}

const EDGE_DURATIONS: [i64; 6] = [0, 59, 60, 3599, 3600, 86_399];

const EN: usize = 0;
const JA: usize = 1;
const KO: usize = 2;
const ZH_TW: usize = 3;
const TH: usize = 4;
const REGION_OF: [&str; 5] = ["en", "ja", "ko", "zh-TW", "th"];
const TEMPLATES_PER_LANGUAGE: usize = 7;

struct Language {
    templates: [&'static str; TEMPLATES_PER_LANGUAGE],
    intro: &'static str,
    sentences: &'static [&'static str],
}

const LANGUAGES: [Language; 5] = [
    Language {
        templates: [
            "{t}",
            "{t} | Full Guide",
            "{t} (Part {n})",
            "I Tried {t} for {n} Days",
            "{t} — Honest Review",
            "\"{t}\" Challenge 🔥",
            "{t} in {n} Minutes",
        ],
        intro: "In this video: {t}, step by step.",
        sentences: &[
            "Thanks for watching! New videos every week.",
            "Timestamps: 0:00 intro, 1:30 main part, 8:45 results.",
            "Tell us in the comments what you want to see next.",
            "Filmed handheld on location, no sponsors.",
            "Music: original soundtrack by the channel.",
            "Recipe & links are in the pinned comment.",
            "Shot in 4K; turn on subtitles for the \"director's notes\".",
        ],
    },
    Language {
        templates: [
            "{t}",
            "【完全版】{t}",
            "{t}（パート{n}）",
            "{n}日間{t}に挑戦してみた",
            "{t}｜本音レビュー",
            "「{t}」チャレンジ🔥",
            "【{n}分】{t}",
        ],
        intro: "今回は{t}を詳しく紹介します。",
        sentences: &[
            "チャンネル登録と高評価よろしくお願いします！",
            "目次：0:00 オープニング 1:30 本編 8:45 まとめ",
            "コメントで次に見たい動画を教えてください。",
            "撮影はすべて手持ちカメラで行いました。",
            "BGMはオリジナル曲です。",
            "レシピとリンクは固定コメントにあります。",
            "字幕をオンにすると解説が見られます。",
        ],
    },
    Language {
        templates: [
            "{t}",
            "[완벽 가이드] {t}",
            "{t} (파트 {n})",
            "{n}일 동안 {t} 도전",
            "{t} | 솔직 리뷰",
            "\"{t}\" 챌린지 🔥",
            "{n}분 만에 {t}",
        ],
        intro: "이번 영상에서는 {t}을(를) 자세히 소개합니다.",
        sentences: &[
            "구독과 좋아요 부탁드립니다!",
            "타임스탬프: 0:00 인트로 1:30 본편 8:45 결과",
            "다음에 보고 싶은 영상을 댓글로 알려주세요.",
            "모든 장면은 핸드헬드 카메라로 촬영했습니다.",
            "배경음악은 자체 제작 곡입니다.",
            "레시피와 링크는 고정 댓글에 있어요.",
            "자막을 켜면 해설을 볼 수 있어요.",
        ],
    },
    Language {
        templates: [
            "{t}",
            "【完整版】{t}",
            "{t}（第{n}集）",
            "挑戰{n}天{t}",
            "{t}｜真心評測",
            "「{t}」挑戰🔥",
            "{n}分鐘學會{t}",
        ],
        intro: "這支影片帶大家一步一步認識{t}。",
        sentences: &[
            "喜歡的話記得訂閱並按讚！",
            "時間軸：0:00 開場 1:30 正片 8:45 總結",
            "留言告訴我們下次想看什麼。",
            "全程手持拍攝，沒有業配。",
            "配樂為頻道原創。",
            "食譜和連結放在置頂留言。",
            "開啟字幕可以看到幕後解說。",
        ],
    },
    Language {
        templates: [
            "{t}",
            "{t} | ฉบับสมบูรณ์",
            "{t} (ตอนที่ {n})",
            "ลอง{t} {n} วัน",
            "{t} | รีวิวตรงๆ",
            "ชาเลนจ์ \"{t}\" 🔥",
            "{t} ใน {n} นาที",
        ],
        intro: "ในคลิปนี้เราจะพาไปรู้จัก{t}แบบละเอียด",
        sentences: &[
            "ฝากกดติดตามและกดไลก์ด้วยนะครับ",
            "ไทม์สแตมป์: 0:00 เปิดคลิป 1:30 เนื้อหาหลัก 8:45 สรุป",
            "คอมเมนต์บอกได้เลยว่าอยากดูคลิปอะไรต่อ",
            "ถ่ายทำด้วยกล้องมือถือทั้งหมด",
            "เพลงประกอบเป็นเพลงต้นฉบับของช่อง",
            "สูตรและลิงก์อยู่ในคอมเมนต์ที่ปักหมุดไว้",
            "เปิดซับไตเติลเพื่อดูคำอธิบายเพิ่มเติม",
        ],
    },
];

/// The same topic in each language: en, ja, ko, zh-TW, th.
const TOPICS: [[&str; 5]; 18] = [
    [
        "Homemade Tonkotsu Ramen",
        "自家製豚骨ラーメン",
        "집에서 만드는 돈코츠 라멘",
        "在家做豚骨拉麵",
        "ทำราเมงทงคตสึเองที่บ้าน",
    ],
    [
        "Taipei Night Market Food Tour",
        "台北夜市食べ歩き",
        "타이베이 야시장 먹방 투어",
        "台北夜市美食之旅",
        "ตะลุยกินตลาดกลางคืนไทเป",
    ],
    [
        "Bangkok Street Food at Midnight",
        "深夜のバンコク屋台めし",
        "한밤중 방콕 길거리 음식",
        "深夜曼谷街頭小吃",
        "สตรีทฟู้ดกรุงเทพยามดึก",
    ],
    ["Autumn Leaves Walk in Kyoto", "京都の紅葉さんぽ", "교토 단풍 산책", "京都紅葉散步", "เดินชมใบไม้แดงที่เกียวโต"],
    [
        "Guitar Lesson for Absolute Beginners",
        "初心者のためのギター講座",
        "왕초보를 위한 기타 레슨",
        "零基礎吉他教學",
        "สอนกีตาร์สำหรับมือใหม่",
    ],
    [
        "Seoul Night Drive in the Rain",
        "雨の夜のソウルドライブ",
        "비 오는 밤 서울 드라이브",
        "雨夜首爾兜風",
        "ขับรถชมกรุงโซลยามค่ำคืนกลางสายฝน",
    ],
    [
        "Building a Budget Gaming PC",
        "格安ゲーミングPCを自作",
        "가성비 게이밍 PC 조립",
        "組裝平價電競主機",
        "ประกอบคอมเล่นเกมงบประหยัด",
    ],
    ["Morning Yoga Stretch", "朝ヨガストレッチ", "아침 요가 스트레칭", "晨間瑜伽伸展", "โยคะยืดเส้นยามเช้า"],
    [
        "K-Pop Dance Cover Practice",
        "K-POPダンスカバー練習",
        "케이팝 댄스 커버 연습",
        "K-POP舞蹈翻跳練習",
        "ซ้อมเต้นคัฟเวอร์เคป๊อป",
    ],
    [
        "Tiny Tokyo Apartment Tour",
        "東京の狭小アパートルームツアー",
        "도쿄 초소형 원룸 투어",
        "東京小套房開箱",
        "พาชมห้องเล็กๆ ในโตเกียว",
    ],
    ["Taiwanese Beef Noodle Soup", "台湾牛肉麺のレシピ", "대만 우육면 레시피", "台灣牛肉麵食譜", "สูตรก๋วยเตี๋ยวเนื้อไต้หวัน"],
    [
        "Hidden Cafés of Chiang Mai",
        "チェンマイの隠れ家カフェ",
        "치앙마이 숨은 카페 탐방",
        "清邁隱藏版咖啡廳",
        "คาเฟ่ลับในเชียงใหม่",
    ],
    [
        "Lo-fi Beats to Study To",
        "勉強用ローファイBGM",
        "공부할 때 듣는 로파이",
        "讀書用Lo-fi音樂",
        "เพลงโลไฟสำหรับอ่านหนังสือ",
    ],
    ["Climbing Mount Fuji at Night", "夜の富士山登山", "야간 후지산 등반", "夜爬富士山", "ปีนภูเขาไฟฟูจิตอนกลางคืน"],
    ["Grandma's Kimchi Recipe", "おばあちゃんのキムチ作り", "할머니표 김치 담그기", "阿嬤的泡菜食譜", "สูตรกิมจิของคุณยาย"],
    ["Smartphone Camera Review", "スマホカメラ徹底レビュー", "스마트폰 카메라 리뷰", "手機相機評測", "รีวิวกล้องสมาร์ทโฟน"],
    ["Muay Thai Training Camp", "ムエタイ合宿トレーニング", "무에타이 훈련 캠프", "泰拳訓練營", "ค่ายฝึกมวยไทย"],
    [
        "Brown Sugar Bubble Tea from Scratch",
        "黒糖タピオカミルクティーを一から",
        "흑당 버블티 만들기",
        "從零開始做黑糖珍珠奶茶",
        "ทำชานมไข่มุกบราวน์ชูการ์เอง",
    ],
];

const TAGS: [&str; 18] = [
    "#ramen #cooking #japanesefood",
    "#taipei #nightmarket #streetfood",
    "#bangkok #streetfood #thailand",
    "#kyoto #autumn #japan",
    "#guitar #lesson #beginner",
    "#seoul #nightdrive #rain",
    "#pcbuild #gaming #budget",
    "#yoga #morning #stretch",
    "#kpop #dancecover #practice",
    "#tokyo #roomtour #apartment",
    "#beefnoodles #taiwan #recipe",
    "#chiangmai #cafe #travel",
    "#lofi #study #music",
    "#fuji #hiking #night",
    "#kimchi #korean #recipe",
    "#smartphone #camera #review",
    "#muaythai #training #fitness",
    "#bubbletea #boba #dessert",
];

const CHANNELS: [&str; 24] = [
    "Kitchen Nomad",
    "東京グルメ日記",
    "서울 브이로그",
    "台北小吃王",
    "ครัวบ้านๆ",
    "Pixel & Byte",
    "Lo-fi Lab",
    "旅するカメラ",
    "먹방 여행자",
    "阿明的廚房",
    "เที่ยวไปกับแพร",
    "The \"Honest\" Reviewer",
    "Night Owl Studio",
    "ギター部",
    "댄스 스튜디오 K",
    "山與海的旅人",
    "มวยไทยไฟต์คลับ",
    "Slow Travel Diaries",
    "やさしいヨガ",
    "테크 언박싱",
    "珍奶研究所",
    "ชาวเชียงใหม่",
    "Backslash\\Games",
    "Midnight Ramen Club",
];
