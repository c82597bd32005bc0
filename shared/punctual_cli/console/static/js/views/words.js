// Schedules in words, for people; the exact schedule is shown beside them.

const DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];

function two(n) {
  return String(n).padStart(2, "0");
}

function every(seconds) {
  const units = [[86400, "day"], [3600, "hour"], [60, "minute"], [1, "second"]];
  for (const [size, name] of units) {
    if (seconds % size === 0) {
      const n = seconds / size;
      return n === 1 ? `every ${name}` : `every ${n} ${name}s`;
    }
  }
  return `every ${seconds} seconds`;
}

function cronWords(expression) {
  const macros = { "@hourly": "every hour", "@daily": "every day at 00:00", "@midnight": "every day at 00:00",
    "@weekly": "every Sunday at 00:00", "@monthly": "on the 1st of every month at 00:00",
    "@yearly": "every 1 January at 00:00", "@annually": "every 1 January at 00:00" };
  if (macros[expression]) return macros[expression];
  const fields = expression.split(" ");
  if (fields.length !== 5) return null;
  const [minute, hour, dom, month, dow] = fields;
  const digits = /^\d+$/;
  const rest = dom === "*" && month === "*";
  if (minute === "*" && hour === "*" && rest && dow === "*") return "every minute";
  const step = /^\*\/(\d+)$/.exec(minute);
  if (step && hour === "*" && rest && dow === "*") return `every ${step[1]} minutes`;
  if (digits.test(minute) && hour === "*" && rest && dow === "*") return `every hour at :${two(minute)}`;
  if (digits.test(minute) && digits.test(hour) && rest) {
    const at = `${two(hour)}:${two(minute)}`;
    if (dow === "*") return `every day at ${at}`;
    if (dow === "1-5") return `every weekday at ${at}`;
    if (digits.test(dow) && Number(dow) <= 7) return `every ${DAYS[Number(dow)]} at ${at}`;
  }
  if (digits.test(minute) && digits.test(hour) && digits.test(dom) && month === "*" && dow === "*") {
    return `on day ${dom} of every month at ${two(hour)}:${two(minute)}`;
  }
  return null;
}

export function describeSchedule(schedule) {
  if (!schedule) return "—";
  if (schedule.type === "cron") {
    const zone = schedule.timezone || "UTC";
    const words = cronWords(schedule.expression);
    return (words ? `${words} (${zone}) · cron ${schedule.expression}` : `cron ${schedule.expression} (${zone})`) + scheduleWindow(schedule);
  }
  if (schedule.type === "rate") return every(schedule.every_seconds) + scheduleWindow(schedule);
  if (schedule.type === "at") return `once, at ${localText(schedule.at)}`;
  return `once (${schedule.type})`;
}

// A recurring schedule's window, as the CLI says it: "from … until …".
function scheduleWindow(schedule) {
  return (schedule.start_at ? `, from ${localText(schedule.start_at)}` : "") + (schedule.end_at ? `, until ${localText(schedule.end_at)}` : "");
}

const localFormat = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });

function localText(iso) {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : localFormat.format(date);
}
