// The admin API as the console sees it (docs: coord ADMIN_API contract,
// docs/console.md). Reads are anonymous; every POST carries the bearer token.

export interface CacheStats {
  hits: number;
  misses: number;
  waits: number;
  evictions: number;
  failures: number;
}

export interface Cache {
  name: string;
  unit: "entries" | "bytes" | "MB";
  capacity: number;
  size: number;
  weight_bytes: number | null;
  stats: CacheStats;
  extra: Record<string, number>;
}

// What a capacity would drop now, as the cache tells (POST
// .../capacity/preview). known: false for caches without a preview (then
// the other fields are null and a decrease evicts down to the capacity).
export interface CapacityPreview {
  name: string;
  unit: Cache["unit"];
  capacity: number;
  size: number;
  new_capacity: number;
  known: boolean;
  flushes: boolean | null;
  entries: number | null;
  bytes: number | null;
}

export interface Switch {
  name: string;
  description: string;
  on: boolean;
  initial: boolean;
}

export interface Setting {
  name: string;
  description: string;
  type: "int" | "string" | "enum" | "bool";
  value: number | string | boolean;
  choices?: string[];
  min?: number;
  max?: number;
}

export interface CreationEvent {
  seq: number;
  time_unix_ms: number;
  kind: string;
  name: string;
  source: string;
  duration_ms: number;
  detail: string;
}

// Raised for any non-2xx answer; carries the server's {"error": ...} text.
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

// Asks the operator for a token; resolves to null when they cancel.
export type TokenPrompt = (reason: string) => Promise<string | null>;

const TOKEN_KEY = "primcache.token";

export class Api {
  constructor(private readonly promptToken: TokenPrompt) {}

  get hasToken(): boolean {
    return sessionStorage.getItem(TOKEN_KEY) !== null;
  }

  forgetToken(): void {
    sessionStorage.removeItem(TOKEN_KEY);
  }

  async caches(): Promise<Cache[]> {
    return (await this.get<{ caches: Cache[] }>("/api/v1/caches")).caches;
  }
  async switches(): Promise<Switch[]> {
    return (await this.get<{ switches: Switch[] }>("/api/v1/switches")).switches;
  }
  async settings(): Promise<Setting[]> {
    return (await this.get<{ settings: Setting[] }>("/api/v1/settings")).settings;
  }
  async events(since: number): Promise<{ events: CreationEvent[]; next: number }> {
    return this.get(`/api/v1/events?since=${since}`);
  }

  setCapacity(cache: string, capacity: number): Promise<Cache> {
    return this.post(`/api/v1/caches/${encodeURIComponent(cache)}/capacity`, { capacity });
  }
  // Changes nothing; a POST with the token, like the change it previews.
  previewCapacity(cache: string, capacity: number): Promise<CapacityPreview> {
    return this.post(`/api/v1/caches/${encodeURIComponent(cache)}/capacity/preview`, { capacity });
  }
  flush(cache: string): Promise<{ flushed_entries: number; cache: Cache }> {
    return this.post(`/api/v1/caches/${encodeURIComponent(cache)}/flush`, {});
  }
  setSwitch(name: string, on: boolean): Promise<Switch> {
    return this.post(`/api/v1/switches/${encodeURIComponent(name)}`, { on });
  }
  setSetting(name: string, value: Setting["value"]): Promise<Setting> {
    return this.post(`/api/v1/settings/${encodeURIComponent(name)}`, { value });
  }

  private async get<T>(path: string): Promise<T> {
    const response = await fetch(path, { cache: "no-store" });
    return read<T>(response);
  }

  // Asks for the token when none is kept, and again after a 401.
  private async post<T>(path: string, body: unknown): Promise<T> {
    let reason = "Changes need the admin token printed by primcached on start.";
    for (;;) {
      let token = sessionStorage.getItem(TOKEN_KEY);
      if (token === null) {
        token = await this.promptToken(reason);
        if (token === null) throw new ApiError(0, "cancelled: no token given");
        sessionStorage.setItem(TOKEN_KEY, token);
      }
      const response = await fetch(path, {
        method: "POST",
        headers: { "Content-Type": "application/json", Authorization: `Bearer ${token}` },
        body: JSON.stringify(body),
      });
      if (response.status === 401) {
        this.forgetToken();
        reason = "The server refused that token. Enter it again.";
        continue;
      }
      return read<T>(response);
    }
  }
}

async function read<T>(response: Response): Promise<T> {
  const text = await response.text();
  if (!response.ok) {
    let message = `${response.status} ${response.statusText}`;
    try {
      const parsed = JSON.parse(text) as { error?: string };
      if (parsed.error) message = parsed.error;
    } catch {
      // not JSON: keep the status line
    }
    throw new ApiError(response.status, message);
  }
  return JSON.parse(text) as T;
}
