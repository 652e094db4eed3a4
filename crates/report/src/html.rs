//! One self-contained HTML page of a run (`contend report RUN --html FILE`): the overview and
//! top findings, a timeline, then the locks, activity, MPI and sharing sections, rendered from
//! the same typed model `contend report` prints as text and `--json` serialises (the caller,
//! `explain`, borrows its pieces into a [`Page`]). Nothing here reads files or re-analyses.
//!
//! The page carries everything inline (CSS, a little vanilla JavaScript for sorting tables and
//! opening sections, SVG charts): it opens from a mail attachment or a CI artifact without a
//! network, prints (a print stylesheet opens every section), and with scripts off still shows
//! every table and chart. Every string that came from the program or the machine (thread names,
//! symbols, file paths, lock names, command lines, notes) goes through [`escape`].
//!
//! Sizes are bounded by aggregation, never by the run's length: timelines are bucketed into
//! pixel columns, tables are cut at a fixed number of rows with a note saying how many more.

use crate::activity::ActivityView;
use crate::locks::{Coverage, Naming as LockNaming};
use crate::run_summary::RunSummary;
use crate::sharing::{Naming as SharingNaming, ProcessLine};
use analysis::locks::LockReport;
use analysis::mpi::MpiRun;
use analysis::sharing::{LineReport, SharingReport};
use analysis::waits::WaitReport;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;
use trace::sched::{State, StateChange};

mod diff;
mod flame;
mod scale;
mod waits;
pub use diff::render_diff;
pub use scale::render_scale;

/// What the page shows of one run, borrowed from the explained run.
pub struct Page<'a> {
    pub summary: &'a RunSummary,
    /// The machine's counts (packages, cores, CPUs, nodes), when the run recorded them.
    pub topology: Option<&'a topology::Summary>,
    pub activity: Option<&'a ActivityView>,
    /// Each thread's scheduler state changes by tid (runs recorded with sched tracepoints).
    pub thread_states: &'a [(u32, Vec<StateChange>)],
    /// When the sampler last saw each thread (tid, ns): where its last state ends, as in the
    /// Perfetto export.
    pub thread_seen_until: Vec<(u32, u64)>,
    pub locks: Option<LocksPage<'a>>,
    /// Why the locks asked for were not measured (the probe loaded in no process).
    pub locks_not_measured: Option<&'a str>,
    /// The blocked futex waits of any runtime and the other blocks (`--locks` runs).
    pub waits: Option<WaitsPage<'a>>,
    /// Why the waits asked for were not recorded (perf refused).
    pub waits_not_measured: Option<&'a str>,
    /// The wait time by call stack as `contend report --folded` writes it (stack root first,
    /// frames joined by `;`, and its ns): the probe's lock waits under `[lock NAME]`, the
    /// futex waits with their user stacks under `[futex wait WORD KIND]`.
    pub folded: Vec<(String, i64)>,
    /// What the off-CPU recorder saw of the blocked time (the activity line's futex waits and
    /// other blocks), when it ran.
    pub off_cpu: Option<crate::activity::OffCpuBlocked>,
    pub mpi: Option<MpiPage<'a>>,
    pub sharing: Option<SharingPage<'a>>,
    /// What the loader noticed about the run (streams cut short, missing symbols).
    pub notices: Vec<String>,
    pub options: Options,
}

pub struct LocksPage<'a> {
    pub report: &'a LockReport,
    pub naming: &'a LockNaming,
    pub coverage: &'a Coverage,
}

pub struct WaitsPage<'a> {
    pub report: &'a WaitReport,
    /// (pid, futex word) -> the global or heap block it lies in.
    pub names: &'a HashMap<(u32, u64), String>,
    pub thread_names: &'a HashMap<u32, String>,
    /// The sched tracepoints ended the blocks (else the waits have no length).
    pub ends_traced: bool,
    /// Some block was recorded with its user stack.
    pub stacks_recorded: bool,
    /// The waits' named stacks ([`analysis::waits::PairedWait`]'s indexes point here).
    pub stacks: &'a [analysis::waits::WaitStack],
}

pub struct MpiPage<'a> {
    pub run: &'a MpiRun,
    /// `function (file:line)` per call-site id.
    pub site_names: &'a [String],
}

pub struct SharingPage<'a> {
    pub report: &'a SharingReport,
    pub processes: &'a [ProcessLine],
    pub naming: &'a SharingNaming,
}

/// How much the page shows (the text report's options, same defaults).
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Locks with a wait histogram.
    pub histograms: usize,
    /// Threads drawn as lanes on the timeline (most lock waiting first, then by tid).
    pub timeline_threads: usize,
    /// Rows of a table before it is cut (with a note).
    pub max_rows: usize,
    /// Shared lines shown in detail.
    pub sharing_top: usize,
    /// The cost of one cache-line transfer (ns), for the estimated cost.
    pub transfer_ns: f64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            histograms: 3,
            timeline_threads: 32,
            max_rows: 500,
            sharing_top: 5,
            transfer_ns: 100.0,
        }
    }
}

/// `s` safe in HTML text and in a quoted attribute value: `& < > " '` as character references,
/// and control characters (other than tab and newline) as U+FFFD, so that nothing a program
/// named can open a tag, end an attribute or hide in the page.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' => out.push(c),
            c if c.is_control() => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// The whole page.
pub fn render(p: &Page<'_>) -> String {
    let mut out = String::with_capacity(64 * 1024);
    let program = p
        .summary
        .command
        .first()
        .map_or("the program", String::as_str);
    page_start(
        &mut out,
        &format!("contend report: {program} ({})", p.summary.run),
        "contend report",
        &p.summary.run,
        &[
            ("overview", "Overview"),
            ("timeline", "Timeline"),
            ("locks", "Locks"),
            ("flame", "Flame graph"),
            ("waits", "Waits"),
            ("activity", "Activity"),
            ("mpi", "MPI"),
            ("sharing", "Sharing"),
            ("streams", "Streams"),
        ],
    );
    overview(&mut out, p);
    timeline(&mut out, p);
    locks(&mut out, p);
    flame::section(&mut out, &p.folded);
    waits::section(&mut out, p);
    activity(&mut out, p);
    mpi(&mut out, p);
    sharing(&mut out, p.sharing.as_ref(), &p.options);
    streams(&mut out, p);
    page_end(
        &mut out,
        &format!("run <code>{}</code>", escape(&p.summary.run)),
    );
    out
}

/// Every page's head (the error catcher first, then the stylesheet) and header: `heading`
/// and the `subject` (a run, a directory, two runs) in code, and the section links.
fn page_start(out: &mut String, title: &str, heading: &str, subject: &str, nav: &[(&str, &str)]) {
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<meta name=\"generator\" content=\"contend\">\n<title>{}</title>\n<script>{CATCH}</script>\n<style>{CSS}</style>\n</head>\n<body>\n",
        escape(title)
    );
    let _ = write!(
        out,
        "<header><h1>{}: <code>{}</code></h1><nav>",
        escape(heading),
        escape(subject)
    );
    for (id, name) in nav {
        let _ = write!(out, "<a href=\"#{}\">{}</a> ", escape(id), escape(name));
    }
    out.push_str("<button type=\"button\" class=\"js-only\" data-details=\"open\">open all</button> <button type=\"button\" class=\"js-only\" data-details=\"close\">close all</button></nav></header>\n<main>\n");
}

/// The footer and the page's script; `from` is HTML (escaped by the caller).
fn page_end(out: &mut String, from: &str) {
    let _ = write!(
        out,
        "</main>\n<footer>Written by contend from {from}. Everything is in this file: no network is used.</footer>\n<script>{JS}</script>\n</body>\n</html>\n"
    );
}

/// `contend c2c report RUN --html FILE`: the sharing section alone.
pub fn render_sharing(run: &str, s: &SharingPage<'_>, options: &Options) -> String {
    let mut out = String::with_capacity(32 * 1024);
    page_start(
        &mut out,
        &format!("contend c2c report: {run}"),
        "contend c2c report",
        run,
        &[("sharing", "Sharing")],
    );
    sharing(&mut out, Some(s), options);
    page_end(&mut out, &format!("run <code>{}</code>", escape(run)));
    out
}

const CSS: &str = r#"
:root{--fg:#1d1d1f;--muted:#666;--line:#ddd;--bg:#fff;--accent:#1f5fa8;--wait:#d62728;--hold:#1f77b4}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg);margin:0}
header{position:sticky;top:0;background:#f6f7f9;border-bottom:1px solid var(--line);padding:.4em 1.2em;z-index:2}
header h1{font-size:1.2em;margin:.2em 0}
nav a{margin-right:.8em;color:var(--accent);text-decoration:none}
nav button{font:inherit;font-size:.85em;margin-left:.3em}
main{padding:0 1.2em 2em;max-width:1400px}
section{margin-top:1.6em;border-top:2px solid var(--line);padding-top:.4em}
h2{font-size:1.15em;margin:.3em 0}
h3{font-size:1em;margin:1em 0 .3em}
code{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:.95em}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:.15em 1em;margin:.5em 0}
dl.facts dt{color:var(--muted)}
dl.facts dd{margin:0;overflow-wrap:anywhere}
ol.findings li{margin:.3em 0}
p.missing{color:var(--muted);font-style:italic}
p.note,li.note{color:#7a4b00}
table{border-collapse:collapse;margin:.4em 0 .8em;font-size:.92em}
caption{text-align:left;font-weight:600;padding:.2em 0}
th,td{border-bottom:1px solid var(--line);padding:.2em .6em;text-align:left;vertical-align:top}
th{background:#f0f2f5;position:relative}
table.sortable th{cursor:pointer}
th[aria-sort=ascending]::after{content:" \25B2";font-size:.7em}
th[aria-sort=descending]::after{content:" \25BC";font-size:.7em}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.worse{color:#c62828;font-weight:600}
.better{color:#2e7d32;font-weight:600}
#worse tbody td{background:#fdecea}
#better tbody td{background:#e8f5e9}
tr:hover td{background:#fafbfc}
details{margin:.4em 0}
summary{cursor:pointer;font-weight:600}
.chart{overflow-x:auto;max-width:100%}
.chart svg{max-width:none}
.legend span{display:inline-block;margin-right:1em}
.zoom button{font:inherit;min-width:2em}
.zoom .hint{color:var(--muted);font-size:.85em}
.legend i{display:inline-block;width:.9em;height:.9em;vertical-align:-.1em;margin-right:.3em}
.js-only{display:none}
html[data-js=ok] .js-only{display:inline-block}
footer{color:var(--muted);font-size:.85em;padding:1em 1.2em;border-top:1px solid var(--line)}
@media print{
 header{position:static}
 nav,.js-only{display:none!important}
 details>*{display:block}
 section{break-inside:auto}
 table,figure,.chart{break-inside:avoid}
 .chart{overflow:visible}
 .chart svg{max-width:100%!important;height:auto}
 body{font-size:11px}
}
"#;

/// Runs first, in the head: an uncaught error anywhere in the page (an inline handler while
/// the page is parsed included) is written into `data-js-error` on `<html>`, where a test can
/// read it from the DOM.
const CATCH: &str = r#"window.addEventListener("error",function(e){document.documentElement.setAttribute("data-js-error",String(e.message));});"#;

/// Sorting by a column header (click or Enter; numbers by `data-v`), opening and closing every
/// section, every section open for printing. `data-js="ok"` on `<html>` when it ran through;
/// `data-load-ms`, when the load event came, in ms since navigation began (browser start not
/// counted: what scripts/bench-html.sh reads).
const JS: &str = r#"
(function(){
"use strict";
var root=document.documentElement;
function key(td){
 if(!td){return "";}
 var v=td.getAttribute("data-v");
 if(v!==null&&v!==""&&isFinite(Number(v))){return Number(v);}
 return td.textContent.trim().toLowerCase();
}
function cmp(x,y){
 var nx=typeof x==="number",ny=typeof y==="number";
 if(nx&&ny){return x-y;}
 if(nx){return -1;}
 if(ny){return 1;}
 return x<y?-1:(x>y?1:0);
}
Array.prototype.forEach.call(document.querySelectorAll("table.sortable"),function(t){
 if(!t.tHead||!t.tBodies.length){return;}
 var ths=t.tHead.rows[0].cells;
 Array.prototype.forEach.call(ths,function(th,i){
  th.tabIndex=0;
  th.title="sort by this column";
  function go(){
   var asc=th.getAttribute("aria-sort")!=="ascending";
   Array.prototype.forEach.call(ths,function(o){o.removeAttribute("aria-sort");});
   th.setAttribute("aria-sort",asc?"ascending":"descending");
   var body=t.tBodies[0];
   var rows=Array.prototype.slice.call(body.rows);
   rows.sort(function(a,b){var c=cmp(key(a.cells[i]),key(b.cells[i]));return asc?c:-c;});
   rows.forEach(function(r){body.appendChild(r);});
  }
  th.addEventListener("click",go);
  th.addEventListener("keydown",function(e){if(e.key==="Enter"){go();}});
 });
});
function all(open){Array.prototype.forEach.call(document.querySelectorAll("details"),function(d){d.open=open;});}
Array.prototype.forEach.call(document.querySelectorAll("button[data-details]"),function(b){
 b.addEventListener("click",function(){all(b.getAttribute("data-details")==="open");});
});
window.addEventListener("beforeprint",function(){all(true);});
// Zoom and pan: the chart's viewBox, kept inside the whole drawing and its aspect, at most
// 64 times magnified; drawn whole again when printed.
var zooms={};
Array.prototype.forEach.call(document.querySelectorAll("svg.zoomable"),function(svg){
 var full=svg.getAttribute("viewBox").split(/[\s,]+/).map(Number);
 if(full.length!==4||!full.every(isFinite)||full[2]<=0||full[3]<=0){return;}
 var cur=full.slice();
 function show(){svg.setAttribute("viewBox",cur.join(" "));}
 function clamp(){
  if(cur[2]>=full[2]){cur=full.slice();return;}
  var least=full[2]/64;
  if(cur[2]<least){cur[3]*=least/cur[2];cur[2]=least;}
  cur[0]=Math.max(full[0],Math.min(cur[0],full[0]+full[2]-cur[2]));
  cur[1]=Math.max(full[1],Math.min(cur[1],full[1]+full[3]-cur[3]));
 }
 function zoom(f,fx,fy){
  var w=cur[2]/f,h=cur[3]/f;
  cur=[cur[0]+(cur[2]-w)*fx,cur[1]+(cur[3]-h)*fy,w,h];
  clamp();show();
 }
 function reset(){cur=full.slice();show();}
 zooms[svg.id]={zoom:zoom,reset:reset};
 svg.addEventListener("wheel",function(e){
  if(e.deltaY>0&&cur[2]>=full[2]){return;}
  e.preventDefault();
  var r=svg.getBoundingClientRect();
  zoom(e.deltaY<0?1.25:0.8,(e.clientX-r.left)/r.width,(e.clientY-r.top)/r.height);
 },{passive:false});
 var drag=null;
 svg.style.cursor="grab";
 svg.addEventListener("pointerdown",function(e){
  if(e.button!==0){return;}
  drag={x:e.clientX,y:e.clientY,from:cur.slice()};
  if(svg.setPointerCapture){try{svg.setPointerCapture(e.pointerId);}catch(err){}}
 });
 svg.addEventListener("pointermove",function(e){
  if(!drag){return;}
  var r=svg.getBoundingClientRect();
  cur=[drag.from[0]-(e.clientX-drag.x)*drag.from[2]/r.width,drag.from[1]-(e.clientY-drag.y)*drag.from[3]/r.height,drag.from[2],drag.from[3]];
  clamp();show();
 });
 function end(){drag=null;}
 svg.addEventListener("pointerup",end);
 svg.addEventListener("pointercancel",end);
 window.addEventListener("beforeprint",reset);
});
Array.prototype.forEach.call(document.querySelectorAll("[data-zoom]"),function(box){
 var z=zooms[box.getAttribute("data-zoom")];
 if(!z){box.style.display="none";return;}
 Array.prototype.forEach.call(box.querySelectorAll("button[data-z]"),function(b){
  b.addEventListener("click",function(){
   var what=b.getAttribute("data-z");
   if(what==="reset"){z.reset();}else{z.zoom(what==="in"?2:0.5,0.5,0.5);}
  });
 });
});
// The flame graph: a click on a frame draws its subtree across the whole width, its callers
// as a path on top (dimmed) and the rest hidden; the root (or "reset zoom") draws it whole.
// Frames are placed by their start and width in ns (data-s, data-ns): exact containment.
Array.prototype.forEach.call(document.querySelectorAll("svg.flame"),function(svg){
 var W=Number(svg.getAttribute("width")),cw=Number(svg.getAttribute("data-char-w"))||6.7;
 var fr=Array.prototype.map.call(svg.querySelectorAll("g.f"),function(g){
  var t=g.querySelector("title");
  return {g:g,d:Number(g.getAttribute("data-d")),s:Number(g.getAttribute("data-s")),n:Number(g.getAttribute("data-ns")),r:g.querySelector("rect"),t:g.querySelector("text"),name:t?t.textContent.split("\n")[0]:""};
 });
 var top=fr.filter(function(o){return o.d===0;})[0];
 if(!top||!(top.n>0)){return;}
 function fit(n,c){if(n.length<=c){return n;}if(c<3){return "";}return n.slice(0,c-1)+"\u2026";}
 function zoom(f){
  fr.forEach(function(o){
   var nx=0,nw=W,show=true,up=false;
   if(o.d<f.d){up=true;show=o.s<=f.s&&o.s+o.n>=f.s+f.n;}
   else if(o.s>=f.s&&o.s+o.n<=f.s+f.n){nx=(o.s-f.s)*W/f.n;nw=o.n*W/f.n;}
   else{show=false;}
   o.g.style.display=show?"":"none";
   if(!show){return;}
   o.g.style.opacity=up?"0.6":"";
   o.r.setAttribute("x",nx.toFixed(2));o.r.setAttribute("width",nw.toFixed(2));
   o.t.setAttribute("x",(nx+3).toFixed(2));
   o.t.textContent=fit(o.name,Math.max(0,Math.floor((nw-6)/cw)));
  });
  svg.setAttribute("data-zoomed",f===top?"":f.name);
 }
 fr.forEach(function(o){o.g.style.cursor="pointer";o.g.addEventListener("click",function(){zoom(o);});});
 Array.prototype.forEach.call(document.querySelectorAll("button[data-flame-reset=\""+svg.id+"\"]"),function(b){b.addEventListener("click",function(){zoom(top);});});
 window.addEventListener("beforeprint",function(){zoom(top);});
});
window.addEventListener("load",function(){root.setAttribute("data-load-ms",String(Math.round(performance.now())));});
root.setAttribute("data-js","ok");
})();
"#;

// ---- small builders ----

/// A table cell: its text (escaped when written) and, for numbers, the value it sorts by.
struct Cell {
    text: String,
    sort: Option<f64>,
}

fn text(s: impl Into<String>) -> Cell {
    Cell {
        text: s.into(),
        sort: None,
    }
}

fn int(v: u64) -> Cell {
    Cell {
        text: v.to_string(),
        sort: Some(v as f64),
    }
}

fn num(v: f64, shown: String) -> Cell {
    Cell {
        text: shown,
        sort: v.is_finite().then_some(v),
    }
}

/// Nanoseconds shown in ms (3 decimals), sorted by the nanoseconds.
fn ms_cell(ns: u64) -> Cell {
    num(ns as f64, ms(ns))
}

fn us_opt(ns: Option<u64>) -> Cell {
    match ns {
        Some(v) => num(v as f64, format!("{:.1}", v as f64 / 1e3)),
        None => text("n/a"),
    }
}

fn ms(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

/// A sortable table; `numeric` columns are right-aligned. Rows past `max_rows` are left out,
/// with a line saying how many.
fn table(
    out: &mut String,
    id: &str,
    caption: &str,
    headers: &[&str],
    numeric: &[usize],
    rows: Vec<Vec<Cell>>,
    max_rows: usize,
) {
    let _ = write!(
        out,
        "<table class=\"sortable\" id=\"{}\"><caption>{}</caption><thead><tr>",
        escape(id),
        escape(caption)
    );
    for (i, h) in headers.iter().enumerate() {
        let class = if numeric.contains(&i) {
            " class=\"num\""
        } else {
            ""
        };
        let _ = write!(out, "<th scope=\"col\"{class}>{}</th>", escape(h));
    }
    out.push_str("</tr></thead><tbody>\n");
    let total = rows.len();
    for row in rows.into_iter().take(max_rows) {
        out.push_str("<tr>");
        for (i, c) in row.iter().enumerate() {
            let class = if numeric.contains(&i) {
                " class=\"num\""
            } else {
                ""
            };
            match c.sort {
                Some(v) => {
                    let _ = write!(out, "<td{class} data-v=\"{v}\">{}</td>", escape(&c.text));
                }
                None => {
                    let _ = write!(out, "<td{class}>{}</td>", escape(&c.text));
                }
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table>\n");
    if total > max_rows {
        let _ = writeln!(
            out,
            "<p class=\"note\">{} more row(s) not shown (the page keeps {max_rows}); <code>contend report --json</code> has them all.</p>",
            total - max_rows
        );
    }
}

fn missing(out: &mut String, why: &str) {
    let _ = writeln!(out, "<p class=\"missing\">{}</p>", escape(why));
}

fn section_start(out: &mut String, id: &str, title: &str) {
    let _ = writeln!(out, "<section id=\"{id}\">\n<h2>{}</h2>", escape(title));
}

/// An SVG made by `report::svg` (or this module), inline; its text is escaped by its maker.
fn chart(out: &mut String, svg: &str) {
    let _ = writeln!(out, "<div class=\"chart\">{svg}</div>");
}

/// A chart whose SVG (`class="zoomable"`, with a viewBox) the page's script lets the reader
/// zoom and pan, with its buttons; with scripts off the buttons are hidden and the whole
/// chart is drawn as it is.
fn zoomable_chart(out: &mut String, id: &str, svg: &str) {
    let _ = writeln!(
        out,
        "<div class=\"zoom js-only\" data-zoom=\"{}\"><button type=\"button\" data-z=\"in\" title=\"zoom in\">+</button> <button type=\"button\" data-z=\"out\" title=\"zoom out\">−</button> <button type=\"button\" data-z=\"reset\">reset</button> <span class=\"hint\">or the wheel over the chart to zoom, drag to pan</span></div>",
        escape(id)
    );
    chart(out, svg);
}

/// Distinct colours for threads, ranks and patterns (Tableau 10).
const PALETTE: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac",
];

// ---- sections ----

fn overview(out: &mut String, p: &Page<'_>) {
    let s = p.summary;
    section_start(out, "overview", "Overview");
    out.push_str("<dl class=\"facts\">\n");
    let fact = |out: &mut String, k: &str, v: &str| {
        let _ = writeln!(out, "<dt>{}</dt><dd>{}</dd>", escape(k), escape(v));
    };
    let command = if s.command.is_empty() {
        "n/a".to_string()
    } else {
        s.command.join(" ")
    };
    let _ = writeln!(
        out,
        "<dt>command</dt><dd><code id=\"command\">{}</code></dd>",
        escape(&command)
    );
    let duration = match (s.duration_s, s.duration_invalid) {
        (_, true) => "invalid: meta.json ends before it starts".to_string(),
        (Some(d), false) => format!("{d:.3} s"),
        (None, false) => "n/a".to_string(),
    };
    fact(out, "started", &s.started_utc);
    fact(out, "duration", &duration);
    if let Some(code) = s.exit_status {
        fact(out, "exit status", &code.to_string());
    }
    fact(out, "host", &format!("{} (Linux {})", s.host, s.kernel));
    match p.topology {
        Some(t) => fact(
            out,
            "machine",
            &format!(
                "{} package(s), {} core(s), {} CPU(s) ({} per core), {} NUMA node(s), {} L3 group(s){}",
                t.packages,
                t.cores,
                t.pus,
                t.smt,
                t.nodes,
                t.l3_groups,
                t.mem_total_kib
                    .map_or(String::new(), |k| format!(", {}", crate::table::human_kib(k)))
            ),
        ),
        None => fact(out, "machine", "topology not recorded in this run"),
    }
    fact(
        out,
        "clock",
        &format!("{} ({} Hz)", s.clock.source.name(), s.clock.hz),
    );
    fact(
        out,
        "captured",
        &if s.captured.is_empty() {
            "nothing".to_string()
        } else {
            s.captured.join(", ")
        },
    );
    fact(
        out,
        "events",
        &format!(
            "{} in {} stream(s), {} dropped",
            s.events,
            s.streams.len(),
            s.events_dropped
        ),
    );
    out.push_str("</dl>\n");
    if !s.unavailable.is_empty() {
        out.push_str("<h3>Not captured</h3>\n<ul id=\"not-captured\">\n");
        for u in &s.unavailable {
            let _ = writeln!(
                out,
                "<li><strong>{}</strong>: {}</li>",
                escape(&u.what),
                escape(&u.why)
            );
        }
        out.push_str("</ul>\n");
    }
    if !p.notices.is_empty() {
        out.push_str("<h3>Notes on the recording</h3>\n<ul>\n");
        for n in &p.notices {
            let _ = writeln!(out, "<li class=\"note\">{}</li>", escape(n));
        }
        out.push_str("</ul>\n");
    }
    out.push_str("<h3>Top findings</h3>\n<ol class=\"findings\" id=\"findings\">\n");
    let found = findings(p);
    if found.is_empty() {
        out.push_str("<li>Nothing stood out: no contended lock, no MPI wait state and no shared cache line was recorded.</li>\n");
    }
    for f in &found {
        let _ = writeln!(out, "<li>{}</li>", escape(f));
    }
    out.push_str("</ol>\n</section>\n");
}

/// The biggest findings in words with their cost, as `contend report` says them.
fn findings(p: &Page<'_>) -> Vec<String> {
    let mut found = Vec::new();
    if let Some(l) = &p.locks {
        if let Some(line) = crate::locks::headline(l.report, l.naming) {
            found.push(line);
        }
        if let Some(top) = l
            .report
            .locks
            .iter()
            .filter(|s| s.critical.wait_ns > 0)
            .max_by_key(|s| s.critical.wait_ns)
        {
            let site = top
                .sites
                .iter()
                .filter(|s| s.critical_wait_ns > 0)
                .max_by_key(|s| s.critical_wait_ns)
                .map_or(String::new(), |s| {
                    format!(
                        ", most at {} ({} ms)",
                        l.naming.site(s.site),
                        ms(s.critical_wait_ns)
                    )
                });
            found.push(format!(
                "On the critical path, the most waiting was for {}: {} ms in {} event(s){site}; without those waits the run would take about {} ms (an upper bound on what removing the lock gains).",
                l.naming.lock(top.lock),
                ms(top.critical.wait_ns),
                top.critical.events,
                ms(top.what_if_ns)
            ));
        }
    }
    if let Some(line) = p.waits.as_ref().and_then(waits::headline) {
        found.push(line);
    }
    if let Some(h) = p.waits.as_ref().and_then(|w| w.report.holders.first()) {
        found.push(format!(
            "The critical section that made others wait most ended at {}: its wakes ended {} futex wait(s), {} ms of waiting ({} thread(s) waited).",
            h.waker_site.as_deref().unwrap_or("a frame not known"),
            h.waits,
            ms(h.total_ns),
            h.waiters
        ));
    }
    if let Some(m) = &p.mpi {
        if let Some(line) = mpi_headline(m) {
            found.push(line);
        }
    }
    if let Some(s) = &p.sharing {
        if let Some(l) = s.report.lines.first() {
            let mut line = format!(
                "Hottest shared cache line: {:#x} ({}) in pid {}: {} transfers between {} thread(s), about {:.1} µs at {:.0} ns a transfer{}.",
                l.address,
                belongs_to(s, l),
                l.pid,
                l.transfers,
                l.threads.len(),
                l.transfers as f64 * p.options.transfer_ns / 1e3,
                p.options.transfer_ns,
                l.class.map_or(String::new(), |c| format!(", {}", c.title()))
            );
            if let Some(fix) = crate::sharing::fix_hint(l) {
                line.push(' ');
                line.push_str(&fix);
            }
            found.push(line);
        }
    }
    if let Some(a) = p.activity {
        found.push(format!(
            "On average {:.2} thread(s) ran and {:.2} were active (running or waiting for a CPU) over {:.3} s; the threads spent {:.3} s waiting for a CPU and {:.3} s blocked, in all.",
            a.running_threads,
            a.active_threads,
            a.elapsed_ns as f64 / 1e9,
            a.runq_wait_ns as f64 / 1e9,
            a.blocked_ns as f64 / 1e9
        ));
        found.push("How much speed-up was lost to memory contention and how much to dependencies needs the program run at several thread counts: `contend scale -- PROGRAM` measures that split, and `contend report SCALE_DIR --html` draws it.".into());
    }
    found
}

/// The wait-state pattern with the most delay, the rank that suffered most of it, the rank
/// that caused most of it and where.
fn mpi_headline(m: &MpiPage<'_>) -> Option<String> {
    let w = &m.run.waits;
    let top = w
        .patterns
        .iter()
        .filter(|t| t.total_ns > 0)
        .max_by_key(|t| t.total_ns)?;
    let rank_of = |f: &dyn Fn(&analysis::waitstates::RankPattern) -> u64| {
        w.ranks
            .iter()
            .filter_map(|r| {
                r.by_pattern
                    .iter()
                    .find(|b| b.pattern == top.pattern)
                    .map(|b| (r.rank, f(b)))
            })
            .filter(|&(_, ns)| ns > 0)
            .max_by_key(|&(_, ns)| ns)
    };
    let suffered = rank_of(&|b| b.suffered_ns);
    let caused = rank_of(&|b| b.caused_ns);
    let site = w
        .sites
        .iter()
        .filter(|s| s.pattern == top.pattern)
        .max_by_key(|s| s.total_ns)
        .map(|s| site_name(m.site_names, s.site));
    Some(format!(
        "MPI: {} cost the most delay, {} ms in {} wait state(s){}{}{}.",
        top.pattern.title(),
        ms(top.total_ns),
        top.count,
        suffered.map_or(String::new(), |(r, ns)| format!(
            "; rank {r} waited most ({} ms)",
            ms(ns)
        )),
        caused.map_or(String::new(), |(r, ns)| format!(
            "; rank {r} caused most of it by being late ({} ms)",
            ms(ns)
        )),
        site.map_or(String::new(), |s| format!("; most at {s}"))
    ))
}

fn site_name(names: &[String], site: Option<u64>) -> String {
    site.and_then(|i| names.get(i as usize))
        .cloned()
        .unwrap_or_else(|| "(unknown site)".into())
}

fn belongs_to(s: &SharingPage<'_>, l: &LineReport) -> String {
    s.naming
        .lines
        .get(&crate::sharing::line_key(l.pid, l.id))
        .cloned()
        .unwrap_or_else(|| "?".into())
}

// ---- timeline ----

/// Most MPI ranks drawn as lanes, and as bars.
const MAX_LANES: usize = 32;
const MAX_BARS: usize = 256;

/// Pixel columns of the timeline's plot.
const PLOT_W: usize = 960;
const LABEL_W: f64 = 190.0;

/// Time to pixel columns, over `[start, end)`.
#[derive(Clone, Copy)]
struct Axis {
    start: u64,
    end: u64,
}

impl Axis {
    fn span(&self) -> f64 {
        (self.end.saturating_sub(self.start)).max(1) as f64
    }
    /// The columns `[a, b)` covers, each with the ns of `[a, b)` inside it.
    fn columns(&self, a: u64, b: u64, mut f: impl FnMut(usize, u64)) {
        let (a, b) = (a.max(self.start), b.min(self.end));
        if b <= a {
            return;
        }
        let per = self.span() / PLOT_W as f64;
        let col = |t: u64| (((t - self.start) as f64 / per) as usize).min(PLOT_W - 1);
        let (ca, cb) = (col(a), col(b.saturating_sub(1).max(a)));
        for c in ca..=cb {
            let lo = (self.start as f64 + per * c as f64) as u64;
            let hi = (self.start as f64 + per * (c + 1) as f64) as u64;
            let inside = b.min(hi).saturating_sub(a.max(lo));
            if inside > 0 || ca == cb {
                f(c, inside.max(1));
            }
        }
    }
    fn ns_per_column(&self) -> f64 {
        self.span() / PLOT_W as f64
    }
}

/// A lane's pixel columns: how much of each was spent in the state, and what took most of it.
struct Lane {
    ns: Vec<u64>,
    /// The label of the longest contribution to the column, and its length.
    top: Vec<Option<(u32, u64)>>,
}

impl Lane {
    fn new() -> Lane {
        Lane {
            ns: vec![0; PLOT_W],
            top: vec![None; PLOT_W],
        }
    }
    fn add(&mut self, axis: &Axis, a: u64, b: u64, label: u32) {
        let length = b.saturating_sub(a);
        axis.columns(a, b, |c, inside| {
            self.ns[c] = self.ns[c].saturating_add(inside);
            if self.top[c].is_none_or(|(_, l)| length > l) {
                self.top[c] = Some((label, length));
            }
        });
    }
}

/// At most this many rectangles per strip: a run of any length gives a timeline of bounded size
/// (32 lanes × 4 strips, the critical path's marks included, × 160 rectangles of about 250
/// bytes: under 5 MB).
const MAX_RUNS: usize = 160;

/// The strip's runs: cells of 1, 2, 4… columns (as few as keep the runs within [`MAX_RUNS`]),
/// each given a key by `key(first column, end column)` (`None`: nothing drawn), and runs of
/// cells with equal keys merged: `(first column, end column, key)`.
fn runs<K: PartialEq>(key: impl Fn(usize, usize) -> Option<K>) -> Vec<(usize, usize, K)> {
    let mut cell = 1;
    loop {
        let mut out: Vec<(usize, usize, K)> = Vec::new();
        let mut c = 0;
        while c < PLOT_W {
            let end = (c + cell).min(PLOT_W);
            if let Some(k) = key(c, end) {
                match out.last_mut() {
                    Some(last) if last.1 == c && last.2 == k => last.1 = end,
                    _ => out.push((c, end, k)),
                }
            }
            c = end;
        }
        if out.len() <= MAX_RUNS || cell >= PLOT_W {
            return out;
        }
        cell *= 2;
    }
}

/// Draws a lane's columns at `y` (height `h`) in `colour`: runs of cells with the same shade
/// and the same top label become one rectangle, with a tooltip naming the label.
#[allow(clippy::too_many_arguments)]
fn draw_lane(
    svg: &mut String,
    axis: &Axis,
    lane: &Lane,
    y: f64,
    h: f64,
    colour: &dyn Fn(u32) -> String,
    what: &str,
    labels: &[String],
) {
    let per = axis.ns_per_column();
    let key = |a: usize, b: usize| -> Option<(u8, Option<u32>)> {
        let ns: u64 = lane.ns[a..b].iter().sum();
        if ns == 0 {
            return None;
        }
        // Busy fraction of the cell, in 4 steps (several threads' waits can add past 1).
        let shade = (1.0 + 3.0 * (ns as f64 / (per * (b - a) as f64)).min(1.0)).round() as u8;
        let top = lane.top[a..b]
            .iter()
            .flatten()
            .max_by_key(|(_, length)| *length);
        Some((shade, top.map(|(l, _)| *l)))
    };
    for (c, end, (shade, label)) in runs(key) {
        let total: u64 = lane.ns[c..end].iter().sum();
        let name = label
            .and_then(|l| labels.get(l as usize))
            .map_or("?", String::as_str);
        let _ = write!(
            svg,
            "<rect x=\"{}\" y=\"{y:.1}\" width=\"{}\" height=\"{h:.1}\" fill=\"{}\" fill-opacity=\"{:.2}\"><title>{} {}: {} ms in {:.3}–{:.3} s</title></rect>",
            LABEL_W + c as f64,
            end - c,
            label.map_or_else(|| "#888".to_string(), colour),
            0.25 * f64::from(shade),
            escape(what),
            escape(name),
            ms(total),
            per * c as f64 / 1e9,
            per * end as f64 / 1e9
        );
    }
}

fn time_ticks(svg: &mut String, axis: &Axis, y: f64, top: f64) {
    let span_s = axis.span() / 1e9;
    let raw = span_s / 8.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10().floor()) as usize
    };
    let mut t = 0.0;
    while t <= span_s + 1e-12 {
        let x = LABEL_W + PLOT_W as f64 * t / span_s;
        let _ = write!(
            svg,
            "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{top:.0}\" y2=\"{y:.0}\" stroke=\"#eee\"/><text x=\"{x:.1}\" y=\"{:.0}\" text-anchor=\"middle\">{t:.decimals$}</text>",
            y + 14.0
        );
        t += step;
    }
    let _ = write!(
        svg,
        "<text x=\"{:.0}\" y=\"{:.0}\" text-anchor=\"middle\">seconds since the start of the recording</text>",
        LABEL_W + PLOT_W as f64 / 2.0,
        y + 30.0
    );
}

fn timeline(out: &mut String, p: &Page<'_>) {
    section_start(out, "timeline", "Timeline");
    let activity = p.activity.filter(|a| !a.timeline.is_empty());
    let locks = p.locks.as_ref().filter(|l| !l.report.holds.is_empty());
    let states = p.thread_states;
    if activity.is_none() && locks.is_none() && states.is_empty() && p.mpi.is_none() {
        missing(
            out,
            "Nothing over time was recorded: no sampler intervals (recorded with --interval 0), no contended lock and no MPI wait state.",
        );
        out.push_str("</section>\n");
        return;
    }
    // The sampler's and the lock probe's times are both CLOCK_MONOTONIC ns: one axis.
    let mut start = u64::MAX;
    let mut end = 0u64;
    if let Some(a) = activity {
        let first = &a.timeline[0];
        start = start.min(first.ts.saturating_sub(first.length_ns));
        end = end.max(a.timeline[a.timeline.len() - 1].ts);
    }
    // The lock waits and holds drawn, not the lock report's span: that is the recording's,
    // whose start-up and teardown would squeeze a short program into a corner of the plot.
    if let Some(l) = locks {
        for h in &l.report.holds {
            start = start.min(h.requested_ns);
            end = end.max(h.released_ns);
        }
    }
    for c in states.iter().flat_map(|(_, c)| c) {
        start = start.min(c.ts);
        end = end.max(c.ts);
    }
    if start < end {
        let axis = Axis { start, end };
        if let Some(l) = locks {
            critical_path_sentence(out, l.report);
        }
        out.push_str("<p>Each row is drawn in pixel columns: a column's shade is the share of its time in the state, its tooltip names what took most of it.</p>\n");
        threads_over_time(out, p, &axis, activity, locks);
    } else if activity.is_some() || locks.is_some() || !states.is_empty() {
        missing(out, "The sampler and the locks recorded no time span.");
    }
    if let Some(m) = &p.mpi {
        mpi_over_time(out, m);
    }
    out.push_str("</section>\n");
}

fn threads_over_time(
    out: &mut String,
    p: &Page<'_>,
    axis: &Axis,
    activity: Option<&ActivityView>,
    locks: Option<&LocksPage<'_>>,
) {
    let band_h = 90.0;
    let lane_h = 24.0;
    let top = 10.0;
    // Lanes: the threads that waited for a lock, most waiting first, then the other threads
    // whose scheduler states were recorded, by tid.
    struct ThreadLane {
        tid: u32,
        name: String,
        /// Index into the lock report's threads.
        lock_thread: Option<usize>,
        /// Index into `thread_states`.
        states: Option<usize>,
    }
    impl HasTid for ThreadLane {
        fn tid(&self) -> u32 {
            self.tid
        }
        fn has_lock_waits(&self) -> bool {
            self.lock_thread.is_some()
        }
    }
    let mut all: Vec<ThreadLane> = Vec::new();
    if let Some(l) = locks {
        let mut in_holds = vec![false; l.report.threads.len()];
        for h in &l.report.holds {
            if let Some(seen) = in_holds.get_mut(h.thread) {
                *seen = true;
            }
        }
        let mut waited: Vec<(u64, usize)> = l
            .report
            .threads
            .iter()
            .enumerate()
            .filter(|&(i, _)| in_holds[i])
            .map(|(i, t)| (t.wait_ns, i))
            .collect();
        waited.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        for (_, i) in waited {
            let t = &l.report.threads[i];
            all.push(ThreadLane {
                tid: t.tid,
                name: t.name.clone(),
                lock_thread: Some(i),
                states: None,
            });
        }
    }
    let mut by_tid: Vec<(u32, usize)> = p
        .thread_states
        .iter()
        .enumerate()
        .map(|(k, (tid, _))| (*tid, k))
        .collect();
    by_tid.sort_unstable();
    for (tid, k) in by_tid {
        match all.iter_mut().find(|l| l.tid == tid) {
            Some(lane) => lane.states = Some(k),
            None => all.push(ThreadLane {
                tid,
                name: activity
                    .and_then(|a| a.threads.iter().find(|t| t.tid == tid))
                    .map_or_else(String::new, |t| t.name.clone()),
                lock_thread: None,
                states: Some(k),
            }),
        }
    }
    let more = all.len().saturating_sub(p.options.timeline_threads);
    all.truncate(p.options.timeline_threads);
    let lanes = all;
    let lanes_y = top
        + if activity.is_some() {
            band_h + 20.0
        } else {
            0.0
        };
    let bottom = lanes_y + lane_h * lanes.len() as f64;
    let height = bottom + 40.0;
    let width = LABEL_W + PLOT_W as f64 + 20.0;
    let mut svg = String::new();
    let _ = write!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"timeline-threads\" class=\"zoomable\" width=\"{width:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {width:.0} {height:.0}\" font-family=\"sans-serif\" font-size=\"11\"><rect width=\"100%\" height=\"100%\" fill=\"white\"/>"
    );
    time_ticks(&mut svg, axis, bottom, top);
    if let Some(a) = activity {
        activity_band(&mut svg, axis, a, top, band_h);
    }
    let strip = lane_h / 3.0 - 1.0;
    for (k, lane) in lanes.iter().enumerate() {
        let y = lanes_y + lane_h * k as f64;
        let _ = write!(
            svg,
            "<text x=\"{:.0}\" y=\"{:.1}\" text-anchor=\"end\" class=\"lane\">{} {}</text><line x1=\"{LABEL_W}\" x2=\"{:.0}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#f0f0f0\"/>",
            LABEL_W - 6.0,
            y + lane_h * 0.6,
            escape(&lane.name),
            lane.tid,
            LABEL_W + PLOT_W as f64,
            y + lane_h - 0.5,
            y + lane_h - 0.5
        );
        if let Some(s) = lane.states {
            let until = p
                .thread_seen_until
                .iter()
                .find(|&&(tid, _)| tid == lane.tid)
                .map(|&(_, ts)| ts);
            state_strip(
                &mut svg,
                axis,
                &p.thread_states[s].1,
                until,
                y + 0.5,
                strip,
                &format!("{} {}", lane.name, lane.tid),
            );
        }
    }
    // Critical-path waits of threads beyond the lanes drawn.
    let mut critical_not_drawn = 0usize;
    if let Some(l) = locks {
        // Labels: `LOCK at SITE` per (lock, site) met, numbered.
        let mut label_of: BTreeMap<(analysis::locks::LockKey, Option<u64>), u32> = BTreeMap::new();
        let mut labels: Vec<String> = Vec::new();
        let mut wait_lanes: Vec<Lane> = lanes.iter().map(|_| Lane::new()).collect();
        let mut hold_lanes: Vec<Lane> = lanes.iter().map(|_| Lane::new()).collect();
        let mut critical_lanes: Vec<CriticalLane> =
            lanes.iter().map(|_| CriticalLane::new()).collect();
        let lane_of: BTreeMap<usize, usize> = lanes
            .iter()
            .enumerate()
            .filter_map(|(k, lane)| lane.lock_thread.map(|t| (t, k)))
            .collect();
        for h in &l.report.holds {
            let Some(&k) = lane_of.get(&h.thread) else {
                critical_not_drawn += usize::from(h.on_critical_path && h.contended);
                continue;
            };
            let next = labels.len() as u32;
            let label = *label_of.entry((h.lock, h.site)).or_insert_with(|| {
                labels.push(format!(
                    "{} at {}",
                    l.naming.lock(h.lock),
                    l.naming.site(h.site)
                ));
                next
            });
            if h.acquired_ns > h.requested_ns {
                wait_lanes[k].add(axis, h.requested_ns, h.acquired_ns, label);
            }
            if h.on_critical_path && h.contended {
                critical_lanes[k].add(axis, h.requested_ns, h.acquired_ns.max(h.requested_ns + 1));
            }
            hold_lanes[k].add(
                axis,
                h.acquired_ns,
                h.released_ns.max(h.acquired_ns + 1),
                label,
            );
        }
        let lock_colour = |label: u32| PALETTE[label as usize % PALETTE.len()].to_string();
        for (k, lane) in lanes.iter().enumerate() {
            if lane.lock_thread.is_none() {
                continue;
            }
            let y = lanes_y + lane_h * k as f64;
            let thread = format!("{} {}", lane.name, lane.tid);
            draw_lane(
                &mut svg,
                axis,
                &wait_lanes[k],
                y + 0.5 + lane_h / 3.0,
                strip,
                &|_| "#d62728".to_string(),
                &format!("{thread} waited for"),
                &labels,
            );
            critical_strip(
                &mut svg,
                axis,
                &critical_lanes[k],
                y + 0.5 + lane_h / 3.0,
                strip,
                &thread,
            );
            draw_lane(
                &mut svg,
                axis,
                &hold_lanes[k],
                y + 0.5 + 2.0 * lane_h / 3.0,
                strip,
                &lock_colour,
                &format!("{thread} held"),
                &labels,
            );
        }
    }
    let futex_drawn = futex_waits_over_time(&mut svg, p, axis, &lanes, lanes_y, lane_h, strip);
    svg.push_str("</svg>");
    zoomable_chart(out, "timeline-threads", &svg);
    let mut legend = String::from("<p class=\"legend\">");
    if activity.is_some() {
        legend.push_str("<span><i style=\"background:#1f77b4\"></i>running</span><span><i style=\"background:#ff7f0e\"></i>runnable (waiting for a CPU)</span><span><i style=\"background:#c7c7c7\"></i>blocked or sleeping</span>");
    }
    if locks.is_some() {
        legend.push_str("<span><i style=\"background:#d62728\"></i>waiting for a lock (a lane's middle strip)</span><span><i style=\"background:#d62728;outline:2px solid #000;outline-offset:-1px\"></i>a wait on the critical path (outlined in black)</span><span><i style=\"background:#4e79a7\"></i>holding it after a contended acquisition (bottom strip, coloured by lock and call site)</span>");
    }
    if futex_drawn > 0 {
        legend.push_str("<span><i style=\"background:#9467bd\"></i>a futex wait ended by a thread of the program (a lane's middle strip; hover for where it waited and who woke it)</span>");
    }
    legend.push_str("</p>\n");
    out.push_str(&legend);
    if activity.is_some() {
        out.push_str("<p>The top band counts threads (all of the program's) per sampling interval: the sampler records each thread's running, runnable and blocked time per interval, not its state changes, so the band is the threads' sum.</p>\n");
    }
    if !p.thread_states.is_empty() {
        out.push_str("<p class=\"legend\"><span><i style=\"background:#2ca02c\"></i>running</span><span><i style=\"background:#ff7f0e\"></i>runnable</span><span><i style=\"background:#c7c7c7\"></i>blocked (sleeping, disk, stopped)</span> (a lane's top strip: from the sched tracepoints, the state the thread spent most of each column in)</p>\n");
    }
    if locks.is_some() {
        out.push_str("<p>Lanes are the threads that waited for a lock; uncontended acquisitions are summed by the analysis, not kept, so only contended holds are drawn.</p>\n");
    }
    if critical_not_drawn > 0 {
        let _ = writeln!(
            out,
            "<p class=\"note\">{critical_not_drawn} critical-path wait(s) are on threads not drawn.</p>"
        );
    }
    if more > 0 {
        let _ = writeln!(
            out,
            "<p class=\"note\">{more} more thread(s) are not drawn (the lanes are the {} that waited longest for locks, then the others by tid).</p>",
            p.options.timeline_threads
        );
    }
}

/// The futex waits paired with the wake that ended them (issue 22), in the middle strip of the
/// lanes the lock probe's waits do not use (a probe's lock wait covers its futex wait), each
/// labelled with the program's frame that waited and the thread that woke it. Returns how many
/// were drawn.
fn futex_waits_over_time<L: HasTid>(
    svg: &mut String,
    p: &Page<'_>,
    axis: &Axis,
    lanes: &[L],
    lanes_y: f64,
    lane_h: f64,
    strip: f64,
) -> usize {
    let Some(w) = &p.waits else {
        return 0;
    };
    let lane_of: BTreeMap<u32, usize> = lanes
        .iter()
        .enumerate()
        .filter(|(_, l)| !l.has_lock_waits())
        .map(|(k, l)| (l.tid(), k))
        .collect();
    let mut futex_lanes: Vec<Lane> = lanes.iter().map(|_| Lane::new()).collect();
    let mut labels: Vec<String> = Vec::new();
    let mut label_of: BTreeMap<String, u32> = BTreeMap::new();
    let mut drawn = 0;
    for pw in &w.report.paired {
        let Some(&k) = lane_of.get(&pw.waiter) else {
            continue;
        };
        let site = pw
            .waiter_stack
            .and_then(|i| w.stacks.get(i as usize))
            .and_then(|st| st.site.as_deref())
            .unwrap_or("a frame not known");
        let text = format!("at {site}, woken by thread {}", pw.waker);
        let next = labels.len() as u32;
        let label = *label_of.entry(text.clone()).or_insert_with(|| {
            labels.push(text);
            next
        });
        futex_lanes[k].add(axis, pw.start, pw.end.max(pw.start + 1), label);
        drawn += 1;
    }
    for (k, lane) in lanes.iter().enumerate() {
        if lane.has_lock_waits() {
            continue;
        }
        let y = lanes_y + lane_h * k as f64;
        draw_lane(
            svg,
            axis,
            &futex_lanes[k],
            y + 0.5 + lane_h / 3.0,
            strip,
            &|_| "#9467bd".to_string(),
            &format!("{} waited on a futex", lane.tid()),
            &labels,
        );
    }
    drawn
}

/// What [`futex_waits_over_time`] needs of a timeline lane.
trait HasTid {
    fn tid(&self) -> u32;
    /// The lane's middle strip has the lock probe's waits.
    fn has_lock_waits(&self) -> bool;
}

/// The critical path's lock waits of one lane: per pixel column the ns waited, and the waits
/// counted at the first column they cover (so that the marks' counts add up to the waits).
struct CriticalLane {
    ns: Vec<u64>,
    waits: Vec<u64>,
}

impl CriticalLane {
    fn new() -> CriticalLane {
        CriticalLane {
            ns: vec![0; PLOT_W],
            waits: vec![0; PLOT_W],
        }
    }
    fn add(&mut self, axis: &Axis, a: u64, b: u64) {
        let mut first = true;
        axis.columns(a, b, |c, inside| {
            self.ns[c] = self.ns[c].saturating_add(inside);
            if first {
                self.waits[c] += 1;
                first = false;
            }
        });
    }
}

/// Outlines, over a lane's wait strip, where its waits were on the critical path: one
/// rectangle per run of cells with such waits, with how many (`data-waits`) and how long.
fn critical_strip(
    svg: &mut String,
    axis: &Axis,
    lane: &CriticalLane,
    y: f64,
    h: f64,
    thread: &str,
) {
    let per = axis.ns_per_column();
    for (c, end, ()) in runs(|a, b| (lane.ns[a..b].iter().sum::<u64>() > 0).then_some(())) {
        let waits: u64 = lane.waits[c..end].iter().sum();
        let ns: u64 = lane.ns[c..end].iter().sum();
        let _ = write!(
            svg,
            "<rect class=\"critical\" data-waits=\"{waits}\" x=\"{}\" y=\"{y:.1}\" width=\"{}\" height=\"{h:.1}\" fill=\"none\" stroke=\"#000\" stroke-width=\"1.5\"><title>{} waited on the critical path: {waits} wait(s), {} ms in {:.3}–{:.3} s</title></rect>",
            LABEL_W + c as f64,
            end - c,
            escape(thread),
            ms(ns),
            per * c as f64 / 1e9,
            per * end as f64 / 1e9
        );
    }
}

/// The sentence above the timeline: how much of the lock waiting was on the critical path.
fn critical_path_sentence(out: &mut String, r: &LockReport) {
    let waits = r
        .holds
        .iter()
        .filter(|h| h.on_critical_path && h.contended)
        .count();
    if r.critical.events == 0 {
        return;
    }
    let share = if r.summary.wait_ns > 0 {
        format!(
            " ({:.1} % of all lock waiting)",
            r.critical.wait_ns as f64 * 100.0 / r.summary.wait_ns as f64
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "<p id=\"critical-path\"><strong>The critical path</strong> (the chain of lock holds that set the run's length) has {} event(s); {waits} of them waited, {} ms{share}, outlined in black on the lanes below; the others took their lock free.</p>",
        r.critical.events,
        ms(r.critical.wait_ns),
    );
}

/// A thread's scheduler states as a strip: per pixel column the state it spent most of the
/// column in (running, runnable, blocked), runs of one state as one rectangle.
fn state_strip(
    svg: &mut String,
    axis: &Axis,
    changes: &[StateChange],
    until: Option<u64>,
    y: f64,
    h: f64,
    thread: &str,
) {
    let mut ns = vec![[0u64; 3]; PLOT_W];
    let mut sorted: Vec<&StateChange> = changes.iter().collect();
    sorted.sort_by_key(|c| c.ts);
    for (i, c) in sorted.iter().enumerate() {
        let k = match c.state {
            State::Running => 0,
            State::Runnable => 1,
            State::Sleeping | State::DiskSleep | State::Stopped => 2,
            State::Dead => continue,
        };
        // The last state lasts until the thread was last seen, else (no sampler) the
        // recording's end. A thread last seen before its last change (it exited between two
        // samples, its exit not traced) is not drawn past that change: drawn to the end, it
        // would stay runnable or running long after its process was gone.
        let end = sorted
            .get(i + 1)
            .map(|n| n.ts)
            .or(until.map(|u| u.max(c.ts)))
            .unwrap_or(axis.end);
        axis.columns(c.ts, end, |col, inside| {
            ns[col][k] = ns[col][k].saturating_add(inside);
        });
    }
    let main = |a: usize, b: usize| -> Option<usize> {
        let sum = |k: usize| ns[a..b].iter().map(|v| v[k]).sum::<u64>();
        (0..3).filter(|&k| sum(k) > 0).max_by_key(|&k| sum(k))
    };
    let colours = ["#2ca02c", "#ff7f0e", "#c7c7c7"];
    let names = ["running", "runnable", "blocked"];
    let per = axis.ns_per_column();
    for (c, end, k) in runs(main) {
        let sum = |j: usize| ns[c..end].iter().map(|v| v[j]).sum::<u64>();
        let _ = write!(
            svg,
            "<rect x=\"{}\" y=\"{y:.1}\" width=\"{}\" height=\"{h:.1}\" fill=\"{}\"><title>{}: mostly {} in {:.3}–{:.3} s (running {} ms, runnable {} ms, blocked {} ms)</title></rect>",
            LABEL_W + c as f64,
            end - c,
            colours[k],
            escape(thread),
            names[k],
            per * c as f64 / 1e9,
            per * end as f64 / 1e9,
            ms(sum(0)),
            ms(sum(1)),
            ms(sum(2))
        );
    }
}

/// Stacked bands of threads running, runnable and blocked per sampling interval, averaged into
/// pixel columns.
fn activity_band(svg: &mut String, axis: &Axis, a: &ActivityView, top: f64, h: f64) {
    let mut sums = vec![[0f64; 3]; PLOT_W];
    let mut weight = vec![0f64; PLOT_W];
    for i in &a.timeline {
        let blocked = (f64::from(i.threads) - i.running - i.waiting).max(0.0);
        axis.columns(i.ts.saturating_sub(i.length_ns), i.ts, |c, inside| {
            let w = inside as f64;
            sums[c][0] += i.running * w;
            sums[c][1] += i.waiting * w;
            sums[c][2] += blocked * w;
            weight[c] += w;
        });
    }
    let values: Vec<[f64; 3]> = sums
        .iter()
        .zip(&weight)
        .map(|(s, &w)| {
            if w > 0.0 {
                [s[0] / w, s[1] / w, s[2] / w]
            } else {
                [0.0; 3]
            }
        })
        .collect();
    let max = values
        .iter()
        .map(|v| v[0] + v[1] + v[2])
        .fold(0.0, f64::max)
        .max(1.0);
    let y = |v: f64| top + h - h * v / max;
    let _ = write!(
        svg,
        "<text x=\"{:.0}\" y=\"{:.1}\" text-anchor=\"end\">threads</text><text x=\"{:.0}\" y=\"{:.1}\" text-anchor=\"end\">{max:.0}</text><text x=\"{:.0}\" y=\"{:.1}\" text-anchor=\"end\">0</text>",
        LABEL_W - 6.0,
        top + h / 2.0,
        LABEL_W - 6.0,
        top + 10.0,
        LABEL_W - 6.0,
        top + h
    );
    let colours = ["#1f77b4", "#ff7f0e", "#c7c7c7"];
    let names = ["running", "runnable", "blocked or sleeping"];
    for band in 0..3 {
        let below = |c: usize| values[c][..band].iter().sum::<f64>();
        let upto = |c: usize| values[c][..=band].iter().sum::<f64>();
        let mut points = String::new();
        for c in 0..PLOT_W {
            let _ = write!(points, "{},{:.1} ", LABEL_W + c as f64 + 0.5, y(upto(c)));
        }
        for c in (0..PLOT_W).rev() {
            let _ = write!(points, "{},{:.1} ", LABEL_W + c as f64 + 0.5, y(below(c)));
        }
        let mean = values.iter().map(|v| v[band]).sum::<f64>() / PLOT_W as f64;
        let _ = write!(
            svg,
            "<polygon points=\"{}\" fill=\"{}\" stroke=\"none\"><title>threads {}: {mean:.2} on average over the plot</title></polygon>",
            points.trim_end(),
            colours[band],
            names[band]
        );
    }
}

/// The MPI ranks over time: each rank's wait states, coloured by pattern.
fn mpi_over_time(out: &mut String, m: &MpiPage<'_>) {
    let w = &m.run.waits;
    out.push_str("<h3>MPI ranks over time</h3>\n");
    if w.instances.is_empty() {
        missing(
            out,
            "No MPI wait state was found: no rank waited for another at or above the thresholds.",
        );
        return;
    }
    let start = w.instances.iter().map(|i| i.start_ns).min().unwrap_or(0);
    let end = w
        .instances
        .iter()
        .map(|i| i.start_ns.saturating_add(i.wait_ns))
        .max()
        .unwrap_or(0)
        .max(start + 1);
    // Widen the axis a little so that a wait at the very start or end is visible.
    let pad = (end - start) / 20;
    let axis = Axis {
        start: start.saturating_sub(pad),
        end: end.saturating_add(pad),
    };
    // The ranks that waited most, in rank order: a bounded number of lanes.
    let mut ranks: Vec<(u64, u32)> = m
        .run
        .ranks
        .iter()
        .map(|r| {
            let waited = w.ranks.iter().find(|x| x.rank == r.rank);
            (waited.map_or(0, |x| x.suffered_ns), r.rank)
        })
        .collect();
    ranks.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let more = ranks.len().saturating_sub(MAX_LANES);
    let mut ranks: Vec<u32> = ranks.into_iter().take(MAX_LANES).map(|(_, r)| r).collect();
    ranks.sort_unstable();
    let lane_h = 22.0;
    let top = 10.0;
    let bottom = top + lane_h * ranks.len() as f64;
    let width = LABEL_W + PLOT_W as f64 + 20.0;
    let mut svg = String::new();
    let _ = write!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"timeline-ranks\" class=\"zoomable\" width=\"{width:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {width:.0} {height:.0}\" font-family=\"sans-serif\" font-size=\"11\"><rect width=\"100%\" height=\"100%\" fill=\"white\"/>",
        height = bottom + 40.0
    );
    time_ticks(&mut svg, &axis, bottom, top);
    let mut labels: Vec<String> = Vec::new();
    let mut label_of: BTreeMap<(u8, Option<u32>, Option<u64>), u32> = BTreeMap::new();
    let mut lanes: Vec<Lane> = ranks.iter().map(|_| Lane::new()).collect();
    let pattern_index = |p: analysis::waitstates::Pattern| {
        analysis::waitstates::Pattern::ALL
            .iter()
            .position(|&q| q == p)
            .unwrap_or(0) as u8
    };
    for i in &w.instances {
        let Some(k) = ranks.iter().position(|&r| r == i.rank) else {
            continue;
        };
        let next = labels.len() as u32;
        let label = *label_of
            .entry((pattern_index(i.pattern), i.cause, i.site))
            .or_insert_with(|| {
                labels.push(format!(
                    "{}{} at {}",
                    i.pattern.title(),
                    i.cause
                        .map_or(String::new(), |c| format!(" (caused by rank {c})")),
                    site_name(m.site_names, i.site)
                ));
                next
            });
        lanes[k].add(
            &axis,
            i.start_ns,
            i.start_ns.saturating_add(i.wait_ns.max(1)),
            label,
        );
    }
    let pattern_of_label: Vec<u8> = {
        let mut v = vec![0u8; labels.len()];
        for (&(p, _, _), &l) in &label_of {
            v[l as usize] = p;
        }
        v
    };
    let colour = |l: u32| {
        PALETTE[pattern_of_label.get(l as usize).copied().unwrap_or(0) as usize % PALETTE.len()]
            .to_string()
    };
    for (k, &rank) in ranks.iter().enumerate() {
        let y = top + lane_h * k as f64;
        let _ = write!(
            svg,
            "<text x=\"{:.0}\" y=\"{:.1}\" text-anchor=\"end\">rank {rank}</text><line x1=\"{LABEL_W}\" x2=\"{:.0}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#f0f0f0\"/>",
            LABEL_W - 6.0,
            y + lane_h * 0.65,
            LABEL_W + PLOT_W as f64,
            y + lane_h - 0.5,
            y + lane_h - 0.5
        );
        draw_lane(
            &mut svg,
            &axis,
            &lanes[k],
            y + 2.0,
            lane_h - 5.0,
            &colour,
            &format!("rank {rank}:"),
            &labels,
        );
    }
    svg.push_str("</svg>");
    zoomable_chart(out, "timeline-ranks", &svg);
    let mut legend = String::from("<p class=\"legend\">");
    for t in &w.patterns {
        let _ = write!(
            legend,
            "<span><i style=\"background:{}\"></i>{}</span>",
            PALETTE[pattern_index(t.pattern) as usize % PALETTE.len()],
            escape(t.pattern.title())
        );
    }
    legend.push_str("</p>\n");
    out.push_str(&legend);
    if more > 0 {
        let _ = writeln!(
            out,
            "<p class=\"note\">{more} more rank(s) not drawn (the {MAX_LANES} that waited longest are).</p>"
        );
    }
}

// ---- locks ----

fn locks(out: &mut String, p: &Page<'_>) {
    section_start(out, "locks", "Locks");
    let Some(l) = &p.locks else {
        match p.locks_not_measured {
            Some(why) => missing(
                out,
                &format!("Locks were asked for but not measured: {why}"),
            ),
            None => missing(
                out,
                "Locks were not recorded in this run (record with contend record --locks).",
            ),
        }
        out.push_str("</section>\n");
        return;
    };
    let r = l.report;
    let (naming, max_rows) = (l.naming, p.options.max_rows);
    if let Some(line) = crate::locks::headline(r, naming) {
        let _ = writeln!(out, "<p><strong>{}</strong></p>", escape(&line));
    }
    if r.sample_every > 1 {
        let _ = writeln!(
            out,
            "<p class=\"note\">Sampled mode: 1 in {} uncontended acquisitions was recorded; every contended one was.</p>",
            r.sample_every
        );
    }
    let sum = |s: &analysis::locks::Summary| {
        vec![
            int(s.events),
            int(s.contended),
            ms_cell(s.wait_ns),
            ms_cell(s.protected_ns),
            num(s.mean_hold_ns, format!("{:.2}", s.mean_hold_ns / 1e3)),
        ]
    };
    let mut all = vec![text("all events")];
    all.extend(sum(&r.summary));
    let mut cp = vec![text("on the critical path")];
    cp.extend(sum(&r.critical));
    table(
        out,
        "lock-summary",
        "Summary",
        &[
            "",
            "events",
            "contended",
            "wait (ms)",
            "held (ms)",
            "mean hold (µs)",
        ],
        &[1, 2, 3, 4, 5],
        vec![all, cp],
        max_rows,
    );
    let rows: Vec<Vec<Cell>> = r
        .locks
        .iter()
        .map(|s| {
            vec![
                text(naming.lock(s.lock)),
                text(s.kind.name()),
                int(s.acquisitions),
                int(s.contended),
                ms_cell(s.wait_ns),
                num(s.mean_wait_ns, format!("{:.2}", s.mean_wait_ns / 1e3)),
                us_opt(s.wait_p50_ns),
                us_opt(s.wait_p99_ns),
                us_opt(s.wait_max_ns),
                ms_cell(s.hold_ns),
                int(s.owner_changes),
                int(s.threads.len() as u64),
                ms_cell(s.critical.wait_ns),
                ms_cell(s.what_if_ns),
                text(
                    naming
                        .allocations
                        .get(&s.lock)
                        .map_or(String::new(), |a| a.describe()),
                ),
            ]
        })
        .collect();
    table(
        out,
        "lock-table",
        "Per lock",
        &[
            "lock",
            "kind",
            "acquired",
            "contended",
            "wait (ms)",
            "mean wait (µs)",
            "p50 (µs)",
            "p99 (µs)",
            "max (µs)",
            "held (ms)",
            "owner changes",
            "threads",
            "critical-path wait (ms)",
            "run without its waits (ms)",
            "heap block",
        ],
        &[2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13],
        rows,
        max_rows,
    );
    let mut sites: Vec<Vec<Cell>> = Vec::new();
    for s in &r.locks {
        for site in &s.sites {
            sites.push(vec![
                text(naming.site(site.site)),
                text(naming.lock(s.lock)),
                int(site.acquisitions),
                int(site.contended),
                ms_cell(site.wait_ns),
                ms_cell(site.hold_ns),
                int(site.critical_events),
                ms_cell(site.critical_wait_ns),
            ]);
        }
    }
    sites.sort_by(|a, b| {
        b[4].sort
            .unwrap_or(0.0)
            .total_cmp(&a[4].sort.unwrap_or(0.0))
    });
    table(
        out,
        "site-table",
        "Per call site (most waiting first)",
        &[
            "call site",
            "lock",
            "acquired",
            "contended",
            "wait (ms)",
            "held (ms)",
            "critical-path events",
            "critical-path wait (ms)",
        ],
        &[2, 3, 4, 5, 6, 7],
        sites,
        max_rows,
    );
    who_made_whom_wait(out, r, naming, max_rows);
    let waited: Vec<&analysis::locks::LockStats> = r
        .locks
        .iter()
        .filter(|s| s.contended > 0)
        .take(p.options.histograms)
        .collect();
    if !waited.is_empty() {
        out.push_str("<h3>Wait histograms</h3>\n");
        for s in waited {
            let _ = writeln!(
                out,
                "<details open><summary>{}</summary>",
                escape(&naming.lock(s.lock))
            );
            chart(out, &crate::lock_exports::wait_histogram(r, s.lock, naming));
            out.push_str("</details>\n");
        }
    }
    if !r.conds.is_empty() {
        let rows = r
            .conds
            .iter()
            .map(|c| {
                vec![
                    text(format!("{:#x} (pid {})", c.address, c.pid)),
                    int(c.waits),
                    int(c.timeouts),
                    ms_cell(c.wait_ns),
                    ms_cell(c.max_wait_ns),
                    text(
                        c.sites
                            .iter()
                            .map(|&a| naming.site(Some(a)))
                            .collect::<Vec<_>>()
                            .join("; "),
                    ),
                ]
            })
            .collect();
        table(
            out,
            "cond-table",
            "Condition variables (idle time, not contention)",
            &[
                "condition variable",
                "waits",
                "timeouts",
                "wait (ms)",
                "longest (ms)",
                "call sites",
            ],
            &[1, 2, 3, 4],
            rows,
            max_rows,
        );
    }
    if !r.barriers.is_empty() {
        let rows = r
            .barriers
            .iter()
            .map(|b| {
                vec![
                    text(format!("{:#x} (pid {})", b.address, b.pid)),
                    int(b.waits),
                    ms_cell(b.wait_ns),
                ]
            })
            .collect();
        table(
            out,
            "barrier-table",
            "Barriers",
            &["barrier", "waits", "wait (ms)"],
            &[1, 2],
            rows,
            max_rows,
        );
    }
    for note in crate::locks::unmatched_notes(r) {
        let _ = writeln!(out, "<p class=\"note\">{}</p>", escape(&note));
    }
    for u in &l.coverage.not_measured {
        let _ = writeln!(
            out,
            "<p class=\"note\">Not measured: {}: {}</p>",
            escape(&u.what),
            escape(&u.why)
        );
    }
    out.push_str("</section>\n");
}

/// Per (waiting thread, holding thread, lock): the contended acquisitions of the lock probe,
/// each charged to the thread that held the lock last before the waiter got it
/// (`analysis::locks::previous_owners`, the critical path's rule).
fn who_made_whom_wait(out: &mut String, r: &LockReport, naming: &LockNaming, max_rows: usize) {
    let owners = analysis::locks::previous_owners(&r.holds);
    let mut pairs: BTreeMap<(usize, usize, analysis::locks::LockKey), (u64, u64)> = BTreeMap::new();
    let mut unknown = 0u64;
    for (h, owner) in r.holds.iter().zip(&owners) {
        if !h.contended {
            continue;
        }
        match owner {
            Some(o) => {
                let e = pairs
                    .entry((h.thread, r.holds[*o].thread, h.lock))
                    .or_default();
                e.0 += 1;
                e.1 = e.1.saturating_add(h.wait_ns());
            }
            None => unknown += 1,
        }
    }
    if pairs.is_empty() {
        return;
    }
    let thread = |i: usize| {
        r.threads
            .get(i)
            .map_or_else(|| "?".to_string(), |t| format!("{} {}", t.name, t.tid))
    };
    let mut rows: Vec<(u64, Vec<Cell>)> = pairs
        .into_iter()
        .map(|((waiter, holder, lock), (waits, ns))| {
            (
                ns,
                vec![
                    text(thread(waiter)),
                    text(thread(holder)),
                    text(naming.lock(lock)),
                    int(waits),
                    ms_cell(ns),
                ],
            )
        })
        .collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.0));
    table(
        out,
        "who-table",
        "Who made whom wait (each contended acquisition charged to the thread that held the lock just before)",
        &["waiting thread", "holding thread", "lock", "waits", "wait (ms)"],
        &[3, 4],
        rows.into_iter().map(|(_, r)| r).collect(),
        max_rows,
    );
    if unknown > 0 {
        let _ = writeln!(
            out,
            "<p class=\"note\">{unknown} contended acquisition(s) have no recorded holder before them (the hold was not recorded, or began before the recording).</p>"
        );
    }
}

// ---- activity ----

fn activity(out: &mut String, p: &Page<'_>) {
    section_start(out, "activity", "Activity");
    let Some(a) = p.activity else {
        missing(
            out,
            "The sampler's service times were not recorded (the run was recorded with --interval 0, or imported).",
        );
        out.push_str("</section>\n");
        return;
    };
    let s = |ns: u64| format!("{:.3}", ns as f64 / 1e9);
    let mut rows = vec![
        ("elapsed time T (s)", s(a.elapsed_ns)),
        ("service time τ, all threads (s)", s(a.service_ns)),
        ("run-queue wait, all threads (s)", s(a.runq_wait_ns)),
        ("blocked, all threads (s)", s(a.blocked_ns)),
        (
            "threads running on average (τ / T)",
            format!("{:.2}", a.running_threads),
        ),
        (
            "active threads A: running or runnable",
            format!("{:.2}", a.active_threads),
        ),
        ("threads, most alive at once", a.max_threads.to_string()),
    ];
    if let Some(c) = a.cpu_ns {
        rows.insert(2, ("CPU time from wait4 (s)", s(c)));
    }
    if let Some(st) = a.steal_ns {
        rows.push(("CPU time stolen by the hypervisor (s)", s(st)));
    }
    out.push_str("<dl class=\"facts\">\n");
    for (k, v) in &rows {
        let _ = writeln!(out, "<dt>{}</dt><dd>{}</dd>", escape(k), escape(v));
    }
    out.push_str("</dl>\n");
    if let Some(l) = &p.locks {
        let line = crate::activity::blocked_explained(a, l.report, p.off_cpu);
        if !line.is_empty() {
            let _ = writeln!(out, "<p>{}</p>", escape(line.trim_end()));
        }
    }
    for src in &a.sources {
        let _ = writeln!(out, "<p class=\"note\">source: {}</p>", escape(src));
    }
    let rows = a
        .threads
        .iter()
        .map(|t| {
            vec![
                text(&t.name),
                int(u64::from(t.tid)),
                int(u64::from(t.pid)),
                ms_cell(t.lifetime_ns),
                ms_cell(t.service_ns),
                ms_cell(t.runq_wait_ns),
                ms_cell(t.blocked_ns),
                num(t.active_pct, format!("{:.1}", t.active_pct)),
                int(t.voluntary_switches),
                int(t.involuntary_switches),
            ]
        })
        .collect();
    table(
        out,
        "thread-table",
        "Threads",
        &[
            "thread",
            "tid",
            "pid",
            "lifetime (ms)",
            "running (ms)",
            "runnable (ms)",
            "blocked (ms)",
            "running (% of lifetime)",
            "voluntary switches",
            "involuntary switches",
        ],
        &[1, 2, 3, 4, 5, 6, 7, 8, 9],
        rows,
        p.options.max_rows,
    );
    if !a.timeline.is_empty() {
        chart(
            out,
            &crate::activity::timeline_svg(a, "Threads running and waiting over time"),
        );
    }
    out.push_str("</section>\n");
}

// ---- MPI ----

fn mpi(out: &mut String, p: &Page<'_>) {
    section_start(out, "mpi", "MPI");
    let Some(m) = &p.mpi else {
        missing(
            out,
            "MPI was not recorded in this run (record with contend record --mpi -- mpirun ...).",
        );
        out.push_str("</section>\n");
        return;
    };
    let r = m.run;
    let _ = writeln!(
        out,
        "<p>{} rank(s) recorded{}.</p>",
        r.ranks.len(),
        r.world_size
            .map_or(String::new(), |n| format!(" of {n} in MPI_COMM_WORLD"))
    );
    if !r.missing_ranks.is_empty() {
        let _ = writeln!(
            out,
            "<p class=\"note\">Rank(s) {} left no trace; the others are analysed.</p>",
            r.missing_ranks
                .iter()
                .map(|r| r.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if let Some(line) = mpi_headline(m) {
        let _ = writeln!(out, "<p><strong>{}</strong></p>", escape(&line));
    }
    rank_bars(out, m);
    let rows = r
        .ranks
        .iter()
        .map(|k| {
            let waits = r.waits.ranks.iter().find(|w| w.rank == k.rank);
            vec![
                int(u64::from(k.rank)),
                text(k.host.clone().unwrap_or_default()),
                ms_cell(k.running_ns),
                ms_cell(k.mpi_ns),
                ms_cell(k.p2p_ns),
                ms_cell(k.collective_ns),
                ms_cell(waits.map_or(0, |w| w.suffered_ns)),
                ms_cell(waits.map_or(0, |w| w.caused_ns)),
                int(k.calls),
            ]
        })
        .collect();
    table(
        out,
        "rank-table",
        "Ranks",
        &[
            "rank",
            "host",
            "running (ms)",
            "in MPI (ms)",
            "point-to-point (ms)",
            "collective (ms)",
            "delay: waited (ms)",
            "late: made others wait (ms)",
            "calls",
        ],
        &[0, 2, 3, 4, 5, 6, 7, 8],
        rows,
        p.options.max_rows,
    );
    let rows = r
        .waits
        .sites
        .iter()
        .map(|s| {
            vec![
                text(s.pattern.title()),
                text(site_name(m.site_names, s.site)),
                int(s.count),
                ms_cell(s.total_ns),
                num(s.mean_ns, format!("{:.3}", s.mean_ns / 1e6)),
                ms_cell(s.max_ns),
            ]
        })
        .collect();
    table(
        out,
        "wait-site-table",
        "Wait states by call site",
        &[
            "pattern",
            "call site",
            "count",
            "total (ms)",
            "mean (ms)",
            "max (ms)",
        ],
        &[2, 3, 4, 5],
        rows,
        p.options.max_rows,
    );
    let rows = r
        .calls
        .iter()
        .map(|c| {
            vec![
                text(&c.function),
                text(site_name(m.site_names, c.site)),
                int(c.count),
                ms_cell(c.total_ns),
                num(c.mean_ns, format!("{:.3}", c.mean_ns / 1e6)),
                ms_cell(c.min_ns),
                ms_cell(c.max_ns),
            ]
        })
        .collect();
    table(
        out,
        "call-table",
        "MPI calls by call site",
        &[
            "function",
            "call site",
            "count",
            "total (ms)",
            "mean (ms)",
            "min (ms)",
            "max (ms)",
        ],
        &[2, 3, 4, 5, 6],
        rows,
        p.options.max_rows,
    );
    for note in crate::mpi::notes(r) {
        let _ = writeln!(out, "<p class=\"note\">{}</p>", escape(&note));
    }
    out.push_str("</section>\n");
}

/// Per rank, a bar of its running time: computing, then its time in MPI split into the
/// wait-state patterns it suffered and the rest of its MPI time.
fn rank_bars(out: &mut String, m: &MpiPage<'_>) {
    let r = m.run;
    if r.ranks.is_empty() {
        return;
    }
    let max = r
        .ranks
        .iter()
        .map(|k| k.running_ns)
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let (left, bar_w, bar_h, top) = (80.0, 760.0, 20.0, 10.0);
    let shown = &r.ranks[..r.ranks.len().min(MAX_BARS)];
    let height = top + (bar_h + 8.0) * shown.len() as f64 + 20.0;
    let mut svg = String::new();
    let _ = write!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"rank-bars\" width=\"{:.0}\" height=\"{height:.0}\" font-family=\"sans-serif\" font-size=\"11\"><rect width=\"100%\" height=\"100%\" fill=\"white\"/>",
        left + bar_w + 20.0
    );
    let mut used = std::collections::BTreeSet::new();
    for (k, rank) in shown.iter().enumerate() {
        let y = top + (bar_h + 8.0) * k as f64;
        let _ = write!(
            svg,
            "<text x=\"{:.0}\" y=\"{:.1}\" text-anchor=\"end\">rank {}</text>",
            left - 6.0,
            y + bar_h * 0.7,
            rank.rank
        );
        let mut parts: Vec<(String, &str, u64)> = vec![(
            "computing (outside MPI)".into(),
            "#d9d9d9",
            rank.running_ns.saturating_sub(rank.mpi_ns),
        )];
        let mut waited = 0u64;
        if let Some(w) = r.waits.ranks.iter().find(|w| w.rank == rank.rank) {
            for b in &w.by_pattern {
                if b.suffered_ns == 0 {
                    continue;
                }
                let i = analysis::waitstates::Pattern::ALL
                    .iter()
                    .position(|&q| q == b.pattern)
                    .unwrap_or(0);
                used.insert(i);
                waited = waited.saturating_add(b.suffered_ns);
                parts.push((
                    b.pattern.title().to_string(),
                    PALETTE[i % PALETTE.len()],
                    b.suffered_ns,
                ));
            }
        }
        parts.push((
            "in MPI, not waiting for another rank".into(),
            "#9ecae1",
            rank.mpi_ns.saturating_sub(waited),
        ));
        let mut x = left;
        for (name, colour, ns) in parts {
            if ns == 0 {
                continue;
            }
            let w = bar_w * ns as f64 / max;
            let _ = write!(
                svg,
                "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{bar_h}\" fill=\"{colour}\" stroke=\"white\" stroke-width=\"0.5\"><title>rank {}: {}: {} ms</title></rect>",
                rank.rank,
                escape(&name),
                ms(ns)
            );
            x += w;
        }
    }
    svg.push_str("</svg>");
    out.push_str("<h3>Time of each rank, by what it did</h3>\n");
    chart(out, &svg);
    if r.ranks.len() > shown.len() {
        let _ = writeln!(
            out,
            "<p class=\"note\">The first {MAX_BARS} of {} ranks are drawn.</p>",
            r.ranks.len()
        );
    }
    let mut legend = String::from("<p class=\"legend\"><span><i style=\"background:#d9d9d9\"></i>computing (outside MPI)</span><span><i style=\"background:#9ecae1\"></i>in MPI, not waiting for another rank</span>");
    for i in used {
        let _ = write!(
            legend,
            "<span><i style=\"background:{}\"></i>{}</span>",
            PALETTE[i % PALETTE.len()],
            escape(analysis::waitstates::Pattern::ALL[i].title())
        );
    }
    legend.push_str("</p>\n");
    out.push_str(&legend);
}

// ---- sharing ----

fn sharing(out: &mut String, s: Option<&SharingPage<'_>>, options: &Options) {
    section_start(out, "sharing", "Sharing");
    let Some(s) = s else {
        missing(
            out,
            "Cache-line sharing was not recorded (build the program with contend cc, or record perf c2c with contend c2c record).",
        );
        out.push_str("</section>\n");
        return;
    };
    for pr in s.processes {
        let _ = writeln!(
            out,
            "<p>Process {} (<code>{}</code>): {} thread(s), {} reads and {} writes instrumented, {} transfers on all lines, {} hot line(s) (line size {} B).</p>",
            pr.pid,
            escape(&pr.program),
            pr.threads,
            pr.reads,
            pr.writes,
            pr.transfers,
            pr.hot_lines,
            pr.line_size
        );
    }
    let r = s.report;
    if r.lines.is_empty() {
        missing(
            out,
            "No cache line became hot: no false or true sharing was found (see contend report's text for how long the threads ran together).",
        );
        out.push_str("</section>\n");
        return;
    }
    let transfer_ns = options.transfer_ns;
    let rows = r
        .lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            vec![
                int(i as u64 + 1),
                text(format!("{:#x}", l.address)),
                text(belongs_to(s, l)),
                int(u64::from(l.pid)),
                int(l.transfers),
                num(
                    l.transfers as f64 * transfer_ns,
                    format!("{:.1}", l.transfers as f64 * transfer_ns / 1e3),
                ),
                int(l.loads),
                int(l.stores),
                int(l.threads.len() as u64),
                text(l.class.map_or("-", |c| c.title())),
                match &l.hint {
                    Some(h) => num(
                        h.transfers_removed as f64,
                        format!("{} ({:.1}%)", h.transfers_removed, h.reduction * 100.0),
                    ),
                    None => text("-"),
                },
            ]
        })
        .collect();
    table(
        out,
        "line-table",
        &format!("Shared cache lines, by cross-thread transfers (est. cost at {transfer_ns:.0} ns a transfer)"),
        &[
            "#",
            "line",
            "belongs to",
            "pid",
            "transfers",
            "est. cost (µs)",
            "loads",
            "stores",
            "threads",
            "sharing",
            "fixing saves",
        ],
        &[0, 3, 4, 5, 6, 7, 8, 10],
        rows,
        options.max_rows,
    );
    for (i, l) in r.lines.iter().take(options.sharing_top).enumerate() {
        let _ = writeln!(
            out,
            "<details open class=\"line\" id=\"line-{}\"><summary>Line #{} <code>{:#x}</code> ({}), pid {}: {} transfers, {}</summary>",
            i + 1,
            i + 1,
            l.address,
            escape(&belongs_to(s, l)),
            l.pid,
            l.transfers,
            escape(l.class.map_or("not classified", |c| c.title()))
        );
        let _ = writeln!(
            out,
            "<p>True sharing caused {} of its transfers, false sharing {}.</p>",
            l.true_transfers, l.false_transfers
        );
        chart(out, &byte_layout(l));
        chart(
            out,
            &crate::sharing::heat_strip(
                l,
                &format!("What each thread did to each byte of {:#x}", l.address),
            ),
        );
        if let Some(fix) = crate::sharing::fix_hint(l) {
            let _ = writeln!(
                out,
                "<p class=\"fix\"><strong>{}</strong></p>",
                escape(&fix)
            );
        }
        let rows = l
            .rows
            .iter()
            .map(|row| {
                let code = s.naming.code.get(&crate::sharing::code_key(l.pid, row.pc));
                vec![
                    text(format!("+{:#x}", row.offset)),
                    int(u64::from(row.size)),
                    text(format!("{:?}", row.kind).to_lowercase()),
                    text(format!("T{} ({})", row.thread, row.tid)),
                    int(row.count),
                    int(row.transfers),
                    text(code.map_or_else(|| format!("{:#x}", row.pc), |c| c.symbol.clone())),
                    text(code.and_then(|c| c.source.clone()).unwrap_or_default()),
                ]
            })
            .collect();
        table(
            out,
            &format!("line-{}-rows", i + 1),
            "Accesses by offset, thread and code",
            &[
                "offset",
                "size",
                "kind",
                "thread",
                "count",
                "transfers",
                "code",
                "source",
            ],
            &[1, 4, 5],
            rows,
            options.max_rows,
        );
        out.push_str("</details>\n");
    }
    out.push_str("</section>\n");
}

/// A line's bytes in two rows, the top one coloured by the threads that read each byte, the
/// bottom one by those that wrote it (one colour per thread; dark red where several did), with
/// the fields outlined (dark red when truly shared) and their readers and writers in tooltips.
fn byte_layout(l: &LineReport) -> String {
    let size = l.line_size as usize;
    let cell = 12.0;
    let (left, top) = (48.0, 24.0);
    let width = left + cell * size as f64 + 20.0;
    let height = top + cell * 2.0 + 40.0;
    let mut svg = String::new();
    let _ = write!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"byte-layout\" width=\"{width:.0}\" height=\"{height:.0}\" font-family=\"sans-serif\" font-size=\"10\"><rect width=\"100%\" height=\"100%\" fill=\"white\"/><text x=\"{left}\" y=\"14\" font-size=\"12\">Bytes of {:#x} by the thread that touched them</text><text x=\"{:.0}\" y=\"{:.1}\" text-anchor=\"end\">read</text><text x=\"{:.0}\" y=\"{:.1}\" text-anchor=\"end\">written</text>",
        l.address,
        left - 4.0,
        top + cell * 0.75,
        left - 4.0,
        top + cell * 1.75
    );
    for b in 0..size {
        let mut readers = Vec::new();
        let mut writers = Vec::new();
        for (thread, bytes) in &l.byte_use {
            match bytes.get(b).copied().unwrap_or(0) {
                0 => {}
                1 => readers.push(*thread),
                _ => writers.push(*thread),
            }
        }
        let mut touched: Vec<u16> = readers.iter().chain(&writers).copied().collect();
        touched.sort_unstable();
        touched.dedup();
        // One colour per thread; several threads in dark red.
        let fill = |v: &[u16]| match v {
            [] => "#f2f2f2".to_string(),
            [t] => PALETTE[usize::from(*t) % PALETTE.len()].to_string(),
            _ => "#7f0000".to_string(),
        };
        let tip = if touched.is_empty() {
            format!("+{b}: not touched")
        } else {
            let names = |v: &[u16]| {
                v.iter()
                    .map(|t| format!("T{t}"))
                    .collect::<Vec<_>>()
                    .join(",")
            };
            format!(
                "+{b}: read by {}, written by {}",
                if readers.is_empty() {
                    "-".into()
                } else {
                    names(&readers)
                },
                if writers.is_empty() {
                    "-".into()
                } else {
                    names(&writers)
                }
            )
        };
        // The top row by the threads that only read the byte, the bottom row by those that
        // wrote it.
        for (row, who) in [&readers, &writers].into_iter().enumerate() {
            let _ = write!(
                svg,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{cell}\" height=\"{cell}\" fill=\"{}\" stroke=\"white\" stroke-width=\"0.5\"><title>{}</title></rect>",
                left + cell * b as f64,
                top + cell * row as f64,
                fill(who),
                escape(&tip)
            );
        }
        if b % 8 == 0 {
            let _ = write!(
                svg,
                "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"#555\">+{b}</text>",
                left + cell * b as f64,
                top + cell * 2.0 + 14.0
            );
        }
    }
    for f in &l.fields {
        let x = left + cell * f64::from(f.offset);
        let w = cell * f64::from(f.size);
        let threads = |s: &std::collections::BTreeSet<u16>| {
            s.iter()
                .map(|t| format!("T{t}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        let _ = write!(
            svg,
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{w:.1}\" height=\"{:.1}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"><title>field +{} ({} B): read by {}, written by {}; {} transfers; {}</title></rect>",
            top - 1.0,
            cell * 2.0,
            if f.truly_shared { "#7f0000" } else { "#333" },
            f.offset,
            f.size,
            threads(&f.readers),
            threads(&f.writers),
            f.transfers,
            if f.truly_shared { "truly shared (another thread writes it)" } else { "one thread's own (false sharing with its neighbours)" }
        );
    }
    let mut x = left;
    let ly = top + cell * 2.0 + 30.0;
    for (thread, _) in &l.byte_use {
        let _ = write!(
            svg,
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{:.1}\" y=\"{ly:.1}\">T{thread}</text>",
            ly - 9.0,
            PALETTE[usize::from(*thread) % PALETTE.len()],
            x + 13.0
        );
        x += 50.0;
    }
    let _ = write!(
        svg,
        "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"#7f0000\"/><text x=\"{:.1}\" y=\"{ly:.1}\">several threads</text>",
        ly - 9.0,
        x + 13.0
    );
    svg.push_str("</svg>");
    svg
}

// ---- streams ----

fn streams(out: &mut String, p: &Page<'_>) {
    section_start(out, "streams", "Streams");
    let s = p.summary;
    if s.streams.is_empty() {
        missing(out, "The run has no event streams.");
        out.push_str("</section>\n");
        return;
    }
    out.push_str("<details><summary>The run's event streams</summary>\n");
    let rows = s
        .streams
        .iter()
        .map(|st| {
            vec![
                text(&st.file),
                text(format!("{:?}", st.kind).to_lowercase()),
                int(u64::from(st.pid)),
                text(
                    st.rank
                        .map_or_else(|| st.tid.to_string(), |r| format!("rank {r}")),
                ),
                int(st.events),
                int(st.dropped),
                text(if st.complete { "yes" } else { "no" }),
            ]
        })
        .collect();
    table(
        out,
        "stream-table",
        "Streams",
        &[
            "stream", "kind", "pid", "tid/rank", "events", "dropped", "closed",
        ],
        &[2, 4, 5],
        rows,
        p.options.max_rows,
    );
    out.push_str("</details>\n</section>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_leaves_no_markup_in_text_or_attributes() {
        assert_eq!(
            escape("<script>alert(1)</script>"),
            "&lt;script&gt;alert(1)&lt;/script&gt;"
        );
        assert_eq!(escape(r#"a"b'c&d"#), "a&quot;b&#39;c&amp;d");
        assert_eq!(
            escape("x\u{0}y\u{1b}[31m\tz\n"),
            "x\u{fffd}y\u{fffd}[31m\tz\n"
        );
        assert_eq!(escape("über µs"), "über µs");
        for hostile in ["<img src=x onerror=alert(1)>", "\"><svg onload=alert(1)>"] {
            let e = escape(hostile);
            assert!(
                !e.contains('<') && !e.contains('>') && !e.contains('"'),
                "{e}"
            );
        }
    }

    fn summary(command: &str) -> RunSummary {
        RunSummary {
            run: "run<1>".into(),
            command: vec![command.into()],
            started_utc: "2026-11-26T00:00:00Z".into(),
            started_unix_ns: 0,
            ended_utc: None,
            duration_s: Some(1.0),
            duration_invalid: false,
            host: "h".into(),
            kernel: "6".into(),
            clock: crate::run_summary::ClockSummary {
                source: trace::ClockSource::Monotonic,
                hz: 1_000_000_000,
                calibration_points: 0,
            },
            captured: vec![],
            unavailable: vec![trace::meta::Unavailable {
                what: "locks".into(),
                why: "<b>no probe</b>".into(),
            }],
            streams: vec![],
            events: 0,
            events_dropped: 0,
            exit_status: Some(0),
            interference: None,
        }
    }

    #[test]
    fn a_run_without_sections_says_what_was_not_recorded_and_escapes_its_names() {
        let s = summary("<script>alert(1)</script>");
        let page = render(&Page {
            summary: &s,
            topology: None,
            activity: None,
            thread_states: &[],
            thread_seen_until: Vec::new(),
            locks: None,
            locks_not_measured: None,
            waits: None,
            waits_not_measured: None,
            folded: Vec::new(),
            off_cpu: None,
            mpi: None,
            sharing: None,
            notices: vec!["a <note>".into()],
            options: Options::default(),
        });
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert!(!page.contains("<script>alert"), "unescaped command");
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(page.contains("&lt;b&gt;no probe&lt;/b&gt;"));
        assert!(page.contains("a &lt;note&gt;"));
        assert!(page.contains("Locks were not recorded in this run"));
        assert!(page.contains("MPI was not recorded in this run"));
        assert!(page.contains("Cache-line sharing was not recorded"));
        assert!(page.contains("Nothing over time was recorded"));
        // The page's own two scripts; nothing loaded from elsewhere.
        assert_eq!(page.matches("<script>").count(), 2);
        assert_eq!(page.matches("<script").count(), 2);
        assert!(!page.contains("src=\"http") && !page.contains("href=\"http"));
    }

    /// 64 threads taking one lock in turn, 400 000 contended holds and as many scheduler
    /// state changes over a second, every pixel column of every strip different: the page
    /// stays within its budget of rectangles and far under 10 MB.
    #[test]
    fn a_busy_run_gives_a_page_of_bounded_size() {
        let threads = 64usize;
        let holds = 400_000u64;
        let mut report = analysis::locks::analyze(
            &analysis::locks::LockInput::default(),
            &analysis::locks::Filter::default(),
        );
        report.start_ns = 0;
        report.end_ns = holds * 2_500;
        let lock = analysis::locks::LockKey {
            pid: 1,
            address: 0x4000,
        };
        for t in 0..threads {
            report.threads.push(analysis::locks::ThreadInfo {
                pid: 1,
                tid: 100 + t as u32,
                name: format!("worker-{t}"),
                holds: holds / threads as u64,
                wait_ns: 1_000 * t as u64,
                dropped: 0,
            });
        }
        for i in 0..holds {
            let t0 = i * 2_500;
            report.holds.push(analysis::locks::Hold {
                thread: (i % threads as u64) as usize,
                lock,
                kind: trace::ObjectKind::Mutex,
                site: Some(0x10 + i % 7),
                requested_ns: t0,
                acquired_ns: t0 + 1_000 + (i % 13) * 50,
                released_ns: t0 + 2_400,
                contended: true,
                shared: false,
                after_cond: false,
                tried: false,
                unreleased: false,
                on_critical_path: i % 2 == 0,
                weight: 1,
            });
        }
        let states: Vec<(u32, Vec<StateChange>)> = (0..threads)
            .map(|t| {
                let changes = (0..holds / threads as u64 * 2)
                    .map(|k| StateChange {
                        ts: k * 1_250 * threads as u64 / 2 + t as u64,
                        state: [State::Running, State::Runnable, State::Sleeping][(k % 3) as usize],
                        cpu: Some(0),
                        waker: 0,
                    })
                    .collect();
                (100 + t as u32, changes)
            })
            .collect();
        let naming = LockNaming::default();
        let coverage = Coverage::default();
        let s = summary("busy");
        let page = render(&Page {
            summary: &s,
            topology: None,
            activity: None,
            thread_states: &states,
            thread_seen_until: Vec::new(),
            locks: Some(LocksPage {
                report: &report,
                naming: &naming,
                coverage: &coverage,
            }),
            locks_not_measured: None,
            waits: None,
            waits_not_measured: None,
            folded: Vec::new(),
            off_cpu: None,
            mpi: None,
            sharing: None,
            notices: Vec::new(),
            options: Options::default(),
        });
        let rects = page.matches("<rect").count();
        // 32 lanes of 3 strips and the critical path's marks, within budget; the rest
        // (histogram bars, backgrounds) is small.
        assert!(rects <= 32 * 4 * MAX_RUNS + 300, "{rects} rectangles");
        // Every other hold is on the critical path: the marks count those of the 32 lanes
        // drawn (each lane's threads' holds are 1 in 64), and the rest is said.
        let marked: u64 = page
            .split("<rect class=\"critical\" data-waits=\"")
            .skip(1)
            .map(|r| r[..r.find('"').unwrap()].parse::<u64>().unwrap())
            .sum();
        assert_eq!(
            marked,
            holds / 2 / 2,
            "half the threads' critical waits are drawn"
        );
        assert!(page.contains(&format!(
            "{} critical-path wait(s) are on threads not drawn",
            holds / 4
        )));
        assert!(rects > 32 * 3 * 50, "the strips were drawn: {rects}");
        assert!(page.len() < 4 << 20, "{} bytes", page.len());
        assert!(page.contains("32 more thread(s) are not drawn"));
    }

    #[test]
    fn a_thread_last_seen_before_its_last_change_is_not_drawn_past_it() {
        let axis = Axis {
            start: 0,
            end: PLOT_W as u64 * 100,
        };
        let change = |ts, state| StateChange {
            ts,
            state,
            cpu: None,
            waker: 0,
        };
        let changes = [change(0, State::Running), change(10_000, State::Runnable)];
        let right_end = |until: Option<u64>| {
            let mut svg = String::new();
            state_strip(&mut svg, &axis, &changes, until, 0.0, 5.0, "t");
            svg.split("<rect x=\"")
                .skip(1)
                .map(|r| {
                    let x: f64 = r[..r.find('"').unwrap()].parse().unwrap();
                    let at = r.find("width=\"").unwrap() + 7;
                    x + r[at..at + r[at..].find('"').unwrap()]
                        .parse::<f64>()
                        .unwrap()
                })
                .fold(0.0, f64::max)
        };
        // Seen by the sampler until 50 000 ns: runnable until then (column 500).
        assert_eq!(right_end(Some(50_000)), LABEL_W + 500.0);
        // Last seen at 5 000 ns, before its change to runnable at 10 000: nothing past it
        // (it exited untraced), not runnable to the end of the plot.
        assert_eq!(right_end(Some(5_000)), LABEL_W + 100.0);
        // No sampler: the recording's end.
        assert_eq!(right_end(None), LABEL_W + PLOT_W as f64);
    }

    #[test]
    fn a_strip_has_at_most_its_budget_of_rectangles() {
        // Alternating every column: 960 runs at one column a cell, coarsened until within
        // the budget.
        let got = runs(|a, _| Some(a % 2 == 0));
        assert!(got.len() <= MAX_RUNS, "{}", got.len());
        assert_eq!(got.first().map(|r| r.0), Some(0));
        assert_eq!(got.last().map(|r| r.1), Some(PLOT_W));
        // Few changes: kept at one column a cell, merged into runs.
        let got = runs(|a, _| (a >= 10).then_some(a < 500));
        assert_eq!(got, vec![(10, 500, true), (500, PLOT_W, false)]);
    }

    #[test]
    fn columns_split_a_span_by_the_time_inside_each() {
        let axis = Axis {
            start: 0,
            end: PLOT_W as u64 * 10,
        };
        let mut got = Vec::new();
        axis.columns(5, 25, |c, ns| got.push((c, ns)));
        assert_eq!(got, vec![(0, 5), (1, 10), (2, 5)]);
        let mut lane = Lane::new();
        lane.add(&axis, 0, 10, 7);
        lane.add(&axis, 2, 4, 8);
        assert_eq!(lane.ns[0], 12);
        assert_eq!(lane.top[0], Some((7, 10)));
        // Outside the axis: nothing.
        let mut none = Vec::new();
        axis.columns(PLOT_W as u64 * 10, PLOT_W as u64 * 20, |c, ns| {
            none.push((c, ns))
        });
        assert!(none.is_empty());
    }
}
