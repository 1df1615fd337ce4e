// The part of autocannon's programmatic API the bench uses (the package ships no types).
declare module 'autocannon' {
  namespace autocannon {
    interface AutocannonRequest {
      method?: string;
      path?: string;
      headers?: Record<string, string>;
      body?: string;
      setupRequest?: (request: AutocannonRequest, context: Record<string, unknown>) => AutocannonRequest;
    }
    interface AutocannonOptions {
      url: string;
      connections?: number;
      pipelining?: number;
      duration?: number;
      method?: string;
      headers?: Record<string, string>;
      body?: string;
      requests?: AutocannonRequest[];
    }
    interface Histogram {
      average: number;
      mean: number;
      p50: number;
      p97_5: number;
      p99: number;
      max: number;
      total: number;
    }
    interface AutocannonResult {
      requests: Histogram;
      latency: Histogram;
      duration: number;
      errors: number;
      timeouts: number;
      non2xx: number;
      statusCodeStats?: Record<string, { count: number }>;
      '2xx': number;
    }
  }
  function autocannon(options: autocannon.AutocannonOptions): Promise<autocannon.AutocannonResult>;
  export = autocannon;
}
