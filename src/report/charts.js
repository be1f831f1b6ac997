// report.html's charts: builds each Chart.js chart from its configuration (#chart-specs, written
// by src/report/charts.rs), then writes a machine-readable status into #chart-status (each
// chart: its type, axis titles and tick labels, legend labels, whether the legend fits, how many
// points were placed and how many pixels were painted) and sets document.title to "ok" only when
// every chart rendered and no script error occurred (tests/it/report/browser.rs reads both).
(function () {
  'use strict';
  var errs = window.__errs || [];
  var status = { library: 'Chart.js ' + (window.Chart && Chart.version), charts: [], errors: errs };

  // Text beside each point of a dataset that has `levelLabels` (the frontier's C1, C2, ...).
  var levelLabels = {
    id: 'levelLabels',
    afterDatasetsDraw: function (chart) {
      var ctx = chart.ctx;
      ctx.save();
      ctx.font = '11px sans-serif';
      chart.data.datasets.forEach(function (d, i) {
        if (!d.levelLabels || !chart.isDatasetVisible(i)) return;
        ctx.fillStyle = d.borderColor;
        chart.getDatasetMeta(i).data.forEach(function (e, j) {
          if (d.levelLabels[j]) ctx.fillText(d.levelLabels[j], e.x + 6, e.y - 6);
        });
      });
      ctx.restore();
    }
  };

  function toggleGroup(e, item, legend) {
    var chart = legend.chart;
    var ds = chart.data.datasets;
    var group = ds[item.datasetIndex].group;
    var show = !chart.isDatasetVisible(item.datasetIndex);
    ds.forEach(function (d, i) {
      if (i === item.datasetIndex || (group !== undefined && d.group === group)) {
        chart.setDatasetVisibility(i, show);
      }
    });
    chart.update();
  }

  function painted(canvas) {
    var ctx = canvas.getContext('2d');
    var img = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
    var n = 0;
    for (var i = 3; i < img.length; i += 4) if (img[i] > 0) n++;
    return n;
  }

  function describe(chart, st) {
    var o = chart.options;
    st.type = chart.config.type;
    st.title = o.plugins && o.plugins.title && o.plugins.title.display ? o.plugins.title.text : null;
    st.axes = {};
    Object.keys(chart.scales).forEach(function (k) {
      var sc = chart.scales[k];
      st.axes[k] = {
        title: sc.options.title && sc.options.title.display ? sc.options.title.text : null,
        ticks: sc.ticks.map(function (t) { return String(t.label); })
      };
    });
    var lg = chart.legend;
    st.legend = lg.legendItems.map(function (i) { return i.text; });
    st.legend_fits = lg.legendHitBoxes.length === lg.legendItems.length &&
      lg.legendHitBoxes.every(function (b) {
        return b.left >= lg.left - 0.5 && b.left + b.width <= lg.right + 0.5 &&
          b.top >= lg.top - 0.5 && b.top + b.height <= lg.bottom + 0.5 &&
          b.left + b.width <= chart.width + 0.5;
      });
    var area = chart.chartArea;
    st.datasets = chart.data.datasets.length;
    st.points = 0;
    st.placed = 0;
    chart.data.datasets.forEach(function (d, i) {
      chart.getDatasetMeta(i).data.forEach(function (e) {
        st.points++;
        if (isFinite(e.x) && isFinite(e.y) && e.x >= area.left - 1 && e.x <= area.right + 1 &&
            e.y >= area.top - 1 && e.y <= area.bottom + 1) st.placed++;
      });
    });
    st.width = chart.width;
    st.height = chart.height;
    st.painted_pixels = painted(chart.canvas);
    var titled = Object.keys(st.axes).every(function (k) { return !!st.axes[k].title; });
    st.ok = !!st.title && titled && st.legend.length > 0 && st.legend_fits &&
      st.points > 0 && st.placed > 0 && st.painted_pixels > 2000;
  }

  var specs = [];
  try {
    specs = JSON.parse(document.getElementById('chart-specs').textContent);
  } catch (e) {
    errs.push('chart-specs: ' + e);
  }
  specs.forEach(function (s) {
    var st = { id: s.id, ok: false };
    status.charts.push(st);
    try {
      if (!window.Chart) throw new Error('Chart.js did not load');
      var cfg = s.config;
      var o = cfg.options = cfg.options || {};
      o.animation = false;
      o.responsive = true;
      o.maintainAspectRatio = false;
      o.plugins = o.plugins || {};
      o.plugins.legend = {
        position: 'bottom',
        onClick: toggleGroup,
        labels: {
          boxWidth: 14,
          filter: function (item, data) { return !data.datasets[item.datasetIndex].noLegend; }
        }
      };
      o.plugins.tooltip = {
        callbacks: {
          label: function (c) {
            return (c.raw && c.raw.t) || (c.dataset.label + ': ' + c.formattedValue);
          }
        }
      };
      cfg.plugins = [levelLabels];
      var chart = new Chart(document.getElementById('chart-' + s.id), cfg);
      describe(chart, st);
    } catch (e) {
      st.error = String(e);
      errs.push(s.id + ': ' + e);
    }
  });
  var bad = status.charts.filter(function (c) { return !c.ok; }).map(function (c) { return c.id; });
  status.page_height = document.documentElement.scrollHeight;
  // Everything the page fetched (it must be nothing: the report is one self-contained file).
  status.resources = performance.getEntriesByType('resource').map(function (e) { return e.name; });
  status.ok = errs.length === 0 && bad.length === 0 && status.charts.length === specs.length;
  document.getElementById('chart-status').textContent = JSON.stringify(status);
  document.title = status.ok ? 'ok' : 'error: ' + errs.concat(bad.map(function (b) { return b + ' did not render'; })).join('; ');
})();
